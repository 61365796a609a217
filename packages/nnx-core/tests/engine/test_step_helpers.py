"""finalize_step and the full-precision-only marker (spec §6.1, §2.5)."""

from __future__ import annotations

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import (
    Callback,
    Devices,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    NNTrainParams,
    Precision,
)
from nnx._contracts.precision import ResolvedPrecision
from nnx._engine.steps import TrainStepContext, UpdateWindow
from nnx._step_helpers import finalize_step, full_precision_only


def _loss(ctx: TrainStepContext) -> torch.Tensor:
    (x,), y = ctx.model.split_batch(ctx.batch)
    return torch.nn.functional.cross_entropy(ctx.model.net(x), y)


@full_precision_only
def paradigm_step(ctx: TrainStepContext):
    return finalize_step(ctx, _loss(ctx)).record()


def unmarked_step(ctx: TrainStepContext):
    return finalize_step(ctx, _loss(ctx)).record()


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def hand_loop(batches, *, epochs: int, clip: float | None, skip: set[int] = frozenset()):
    model = tiny_model()
    opt = torch.optim.SGD(model.net.parameters(), lr=0.1)
    for _ in range(epochs):
        for i, (x, y) in enumerate(batches):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model.net(x), y)
            if i in skip:
                continue
            loss.backward()
            if clip is not None:
                torch.nn.utils.clip_grad_norm_(list(model.net.parameters()), clip)
            opt.step()
    return weights(model)


def test_a_finalize_step_trains_like_the_hand_written_loop_bit_for_bit(tmp_path):
    batches = tiny_batches(3)
    optim = NNOptimParams.builder().sgd(max_lr=0.1).grad_clip(0.05).build()
    model = tiny_model()
    run = model.train(NNTrainParams(n_epochs=2, train_loader=batches, optim=optim),
                      train_step_fn=paradigm_step, root=tmp_path / "runs", verbose=False)
    assert same(weights(model), hand_loop(batches, epochs=2, clip=0.05))
    assert [i.update_count for i in run.idps] == [1, 2, 3, 4, 5, 6]
    assert all(i.train_edp.loss == i.train_edp.error for i in run.idps)


class _LRs(Callback):
    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_train_begin(self, ctx):
        ctx.optimizer.register_step_pre_hook(
            lambda opt, *_: self.lrs.append(opt.param_groups[0]["lr"]))


def test_finalize_step_reports_each_update_so_an_update_clock_steps_once_per_batch(tmp_path):
    schedule = NNSchedulerParams.builder().step(step_size=1, factor=0.5).clock(
        "optimizer_update").build()
    probe = _LRs()
    run = tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(3),
                                           optim=sgd(0.4), scheduler=schedule),
                             train_step_fn=paradigm_step, callbacks=[probe],
                             root=tmp_path / "runs", verbose=False)
    assert probe.lrs == pytest.approx([0.4, 0.2, 0.1])  # one scheduler step per batch
    assert [i.update_count for i in run.idps] == [1, 2, 3]


def test_finalize_step_drops_a_nan_batch_with_the_guards_warning(tmp_path):
    batches = tiny_batches(3)
    x, y = batches[1]
    batches[1] = (torch.full_like(x, float("nan")), y)
    model = tiny_model()
    with pytest.warns(RuntimeWarning, match=r"non-finite training loss at batch 1.*1 of 3"):
        run = model.train(NNTrainParams(n_epochs=1, train_loader=batches, optim=sgd()),
                          train_step_fn=paradigm_step, root=tmp_path / "runs", verbose=False)
    assert same(weights(model), hand_loop(batches, epochs=1, clip=None, skip={1}))
    assert [i.update_count for i in run.idps] == [1, 1, 2]
    assert all(p.grad is None for p in model.net.parameters())


@pytest.mark.parametrize("policy", [Precision.FP16, Precision.BF16])
def test_a_full_precision_only_step_refuses_a_reduced_run_before_any_run_dir(tmp_path, policy):
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                    params=NNModelParams(device=Devices.CPU, precision=policy))
    before = weights(model)
    with pytest.raises(ValueError, match=rf"full-precision-only.*{policy.name}"):
        model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd()),
                    train_step_fn=paradigm_step, root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert same(weights(model), before)


def test_an_unmarked_step_on_finalize_step_refuses_reduced_precision_without_stepping(tmp_path):
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                    params=NNModelParams(device=Devices.CPU, precision=Precision.BF16))
    before = weights(model)
    with pytest.raises(ValueError, match=r"ctx\.precision is BF16"):
        model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd()),
                    train_step_fn=unmarked_step, root=tmp_path / "runs", verbose=False)
    assert same(weights(model), before)


def test_a_full_precision_only_step_refuses_accumulation_before_any_run_dir(tmp_path):
    model = tiny_model()
    before, rng = weights(model), torch.get_rng_state()
    with pytest.raises(ValueError, match=r"paradigm_step.*cannot accumulate: "
                                         r"accumulate_grad_batches=2"):
        model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2),
                                  optim=sgd(accumulate=2)),
                    train_step_fn=paradigm_step, root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert same(weights(model), before)
    assert torch.equal(torch.get_rng_state(), rng)


def test_finalize_step_refuses_accumulation_without_stepping(tmp_path):
    model = tiny_model()
    before = weights(model)
    with pytest.raises(ValueError, match="accumulate_grad_batches=2"):
        model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2),
                                  optim=sgd(accumulate=2)),
                    train_step_fn=unmarked_step, root=tmp_path / "runs", verbose=False)
    assert same(weights(model), before)


def _context(model: NNModel, **overrides) -> TrainStepContext:
    opt = torch.optim.SGD(model.net.parameters(), lr=0.1)
    fields = dict(model=model, batch=tiny_batches(1)[0], batch_idx=0, epoch=0, optimizer=opt,
                  precision=ResolvedPrecision(Precision.FP32, "cpu"), scaler=None,
                  grad_clip_norm=None, accumulate_grad_batches=1,
                  window=UpdateWindow(size=1, closes=True))
    fields.update(overrides)
    return TrainStepContext(**fields)


def test_finalize_step_refuses_a_scaler_and_a_non_scalar_loss_before_backward():
    model = tiny_model()
    before = weights(model)
    ctx = _context(model, scaler=torch.amp.GradScaler("cpu"))
    loss = _loss(ctx)
    with pytest.raises(ValueError, match=r"ctx\.scaler"):
        finalize_step(ctx, loss)
    assert loss.grad_fn is not None and all(p.grad is None for p in model.net.parameters())
    plain = _context(model)
    with pytest.raises(ValueError, match=r"loss must be a scalar tensor; got \(4, 3\)"):
        finalize_step(plain, model.net(plain.batch[0]))
    assert all(p.grad is None for p in model.net.parameters())
    assert same(weights(model), before)


def test_an_imperative_step_owns_the_mode_and_train_mode_switches_it_each_epoch(tmp_path):
    from nnx._step_helpers import train_mode

    seen: list[tuple[str, int, bool]] = []

    def keeps_mode(ctx: TrainStepContext):
        seen.append(("keeps", ctx.batch_idx, ctx.model.net.training))
        return finalize_step(ctx, _loss(ctx)).record()

    def switches(ctx: TrainStepContext):
        train_mode(ctx)
        seen.append(("switches", ctx.batch_idx, ctx.model.net.training))
        ctx.model.net.eval()  # a mode change mid-epoch is the step's own business
        return finalize_step(ctx, _loss(ctx)).record()

    for step in (keeps_mode, switches):
        model = tiny_model()
        model.net.eval()
        model.train(NNTrainParams(n_epochs=2, train_loader=tiny_batches(2), optim=sgd()),
                    train_step_fn=step, root=tmp_path / step.__name__, verbose=False)
    assert seen == [("keeps", 0, False), ("keeps", 1, False)] * 2 + [
        ("switches", 0, True), ("switches", 1, False)] * 2
    # The built-in step still trains in train mode.
    model = tiny_model()
    model.net.eval()
    modes: list[bool] = []
    model.net.register_forward_hook(lambda m, _i, _o: modes.append(m.training))
    model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd()),
                root=tmp_path / "default", verbose=False)
    assert modes == [True, True]


def test_finalize_step_reads_the_step_s_values_with_its_loss_before_the_update(tmp_path):
    # Scalar terms the step records come back in FinalizedStep.values, in order.
    seen: list[tuple[float, tuple[float, ...], float]] = []

    @full_precision_only
    def step(ctx: TrainStepContext):
        (x,), y = ctx.model.split_batch(ctx.batch)
        out = ctx.model.net(x)
        norm = out.square().mean()
        done = finalize_step(ctx, torch.nn.functional.cross_entropy(out, y), (norm, norm * 2))
        seen.append((float(norm.detach()), done.values, done.loss))
        return done.record(norm=done.values[0])

    model = tiny_model()
    run = model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd()),
                      train_step_fn=step, root=tmp_path / "runs", verbose=False)
    assert [v for _, v, _ in seen] == [(n, 2 * n) for n, _, _ in seen]
    assert [i.train_edp.extra["norm"] for i in run.idps] == [n for n, _, _ in seen]
