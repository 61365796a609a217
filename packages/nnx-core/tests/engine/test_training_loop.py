"""The supervised loop keeps its contract (spec §2.5, §3.1, §4, §6.2, §6.3, §6.4, §13.2).

Accumulation windows and their normalization, refusals that leave nothing on
disk, the one monitor rule shared by BEST / ReduceLROnPlateau / EarlyStopping,
NLL-from-logits, and the non-destructive inference helpers.
"""

from __future__ import annotations

import math
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from _nnx_core_tiny import sgd
from _support.training_loop import _loader, _scripted_eval, chunks, data, make_model
from torch import nn

from nnx import (
    Callback,
    Devices,
    EarlyStopping,
    Losses,
    MetricSpec,
    MonitorSpec,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
    ProbabilitySpec,
    RunExistsError,
    TaskSpec,
    default_train_step,
)


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


# -- accumulation windows ---------------------------------------------------------------


def test_two_epochs_of_five_microbatches_accumulating_two_make_2_2_1_windows(tmp_path):
    x, y = data(20)
    loader = chunks(x, y, [4] * 5)
    model = make_model()
    steps: list[int] = []
    seen: dict[str, object] = {}

    class CountSteps(Callback):
        def on_train_begin(self, ctx):
            ctx.optimizer.register_step_post_hook(lambda *_: steps.append(ctx.epoch))
            seen["schedule"] = ctx.scheduler

    # A cosine schedule on the update clock with the default budget: the planned
    # horizon is n_epochs x ceil(5 / 2) = 6 updates.
    schedule = NNSchedulerParams.builder().cosine_annealing().clock("optimizer_update").build()
    params = NNTrainParams(n_epochs=2, train_loader=loader, optim=sgd(0.1, accumulate=2),
                           scheduler=schedule)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no update reaches past T_max
        run = model.train(params, callbacks=[CountSteps()], root=tmp_path / "runs", verbose=False)

    assert [i.update_count for i in run.idps] == [0, 1, 1, 2, 3, 3, 4, 4, 5, 6]
    assert [(i.epoch, i.batch_idx) for i in run.idps] == [(e, b) for e in (0, 1) for b in range(5)]
    assert steps == [0, 0, 0, 1, 1, 1]  # three optimizer steps per epoch
    scheduler = seen["schedule"]  # ctx.scheduler: the torch scheduler itself (§14.3)
    assert isinstance(scheduler, torch.optim.lr_scheduler.CosineAnnealingLR)
    saved = NNCheckpoint.load_training_state(run.id, root=tmp_path / "runs")["schedule"]
    assert saved["horizon"] == 6 and saved["steps"] == 6
    assert scheduler.last_epoch == 6
    assert model.net.training is True
    # The cosine reached its floor exactly at the sixth update.
    assert run.idps[-1].lr == pytest.approx(0.0, abs=1e-12)
    assert NNRun.load(run.id, root=tmp_path / "runs").idps[-1].update_count == 6


def _reference_step(model: NNModel, x: torch.Tensor, y: torch.Tensor, lr: float,
                    loss_fn: nn.Module) -> dict[str, torch.Tensor]:
    """One plain-torch SGD step on the whole batch from the model's current weights."""
    torch.manual_seed(0)
    net = type(model.net)(model.net_params)
    net.load_state_dict(model.net.state_dict())
    loss = loss_fn(net(x), y)
    loss.backward()
    with torch.no_grad():
        for p in net.parameters():
            p -= lr * p.grad
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _mean_of_means_step(model: NNModel, parts, lr: float, loss_fn: nn.Module):
    """What a naive accumulation (average of per-microbatch means) would do."""
    net = type(model.net)(model.net_params)
    net.load_state_dict(model.net.state_dict())
    for bx, by in parts:
        (loss_fn(net(bx), by) / len(parts)).backward()
    with torch.no_grad():
        for p in net.parameters():
            p -= lr * p.grad
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _close(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return all(torch.allclose(a[k], b[k], atol=1e-6, rtol=1e-5) for k in a)


@pytest.mark.parametrize("masked", [False, True], ids=["plain", "ignore_index+class_weights"])
def test_uneven_microbatches_in_one_window_equal_one_full_batch(tmp_path, masked):
    x, y = data(10, seed=1)
    loss_fn: nn.Module = nn.CrossEntropyLoss()
    if masked:
        y = y.clone()
        y[[0, 4, 5, 8, 9]] = -1  # the last microbatch is entirely masked
        # The live loss object is authoritative: its class weights and ignore_index.
        loss_fn = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 3.0, 0.5]), ignore_index=-1)
    parts = chunks(x, y, [3, 5, 2])
    lr = 0.5

    accumulated = make_model(seed=7)
    accumulated.loss_fn = loss_fn
    reference = _reference_step(accumulated, x, y, lr, loss_fn)
    naive = _mean_of_means_step(accumulated, parts, lr, loss_fn)
    assert not _close(reference, naive)  # the batch split matters for a naive mean

    run = accumulated.train(
        NNTrainParams(n_epochs=1, train_loader=parts, optim=sgd(lr, accumulate=3), scheduler=None),
        root=tmp_path / "acc", verbose=False)
    assert [i.update_count for i in run.idps] == [0, 0, 1]  # one window, one update
    got = weights(accumulated)
    for key in reference:
        torch.testing.assert_close(got[key], reference[key], atol=1e-6, rtol=1e-5)

    # The same model trained on the single full batch lands on the same weights.
    full = make_model(seed=7)
    full.loss_fn = loss_fn
    full.train(NNTrainParams(n_epochs=1, train_loader=[(x, y)], optim=sgd(lr), scheduler=None),
               root=tmp_path / "full", verbose=False)
    for key, value in weights(full).items():
        torch.testing.assert_close(got[key], value, atol=1e-6, rtol=1e-5)


def test_a_window_whose_every_target_is_masked_takes_no_update(tmp_path):
    x, y = data(9, seed=2)
    y = y.clone()
    y[3:6] = -100
    model = make_model()
    steps: list[int] = []

    class CountSteps(Callback):
        def on_train_begin(self, ctx):
            ctx.optimizer.register_step_post_hook(lambda *_: steps.append(1))

    run = model.train(NNTrainParams(n_epochs=1, train_loader=chunks(x, y, [3, 3, 3]),
                                    optim=sgd(), scheduler=None),
                      callbacks=[CountSteps()], root=tmp_path / "runs", verbose=False)
    assert [i.update_count for i in run.idps] == [1, 1, 2]
    assert len(steps) == 2
    assert run.idps[1].train_edp.loss is None  # no valid target: no loss value


def _refused(tmp_path: Path, model: NNModel, call, error: type[BaseException], match: str):
    before = weights(model)
    with pytest.raises(error, match=match):
        call()
    assert not (tmp_path / "runs").exists()
    assert list(tmp_path.iterdir()) == []
    for key, value in weights(model).items():
        assert torch.equal(value, before[key])


def test_refusals_reserve_no_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = make_model()
    base = NNTrainParams(n_epochs=1, train_loader=_loader(), optim=sgd(), scheduler=None)

    def train(params=base, **kw):
        return lambda: model.train(params, verbose=False, **kw)

    _refused(tmp_path, model, train(NNTrainParams(n_epochs=1, optim=sgd())), ValueError,
             "train_loader")
    _refused(tmp_path, model, train(sgd()), TypeError, "NNTrainParams")
    _refused(tmp_path, model, train({"n_epochs": 1}), TypeError, "NNTrainParams")
    _refused(tmp_path, model, train(callbacks=[42]), TypeError, "callbacks")
    _refused(tmp_path, model, train(salt=""), ValueError, "salt")
    _refused(tmp_path, model, train(salt=1), TypeError, "salt")
    _refused(tmp_path, model, lambda: model.train(
        NNTrainParams(n_epochs=1, train_loader=_loader(), metrics=[MetricSpec("no_such_metric")],
                      scheduler=None), verbose=False), ValueError, "no_such_metric")
    _refused(tmp_path, model, lambda: model.train(
        NNTrainParams(n_epochs=1, train_loader=_loader(), monitor=MonitorSpec(metric="loss"),
                      scheduler=None), verbose=False), ValueError, "val_loader")
    custom_monitor = NNTrainParams(
        n_epochs=1, train_loader=_loader(), metrics=[MetricSpec("nll")],
        monitor=MonitorSpec(metric="nll", split="train"), scheduler=None)
    _refused(tmp_path, model, lambda: model.train(
        custom_monitor, train_step_fn=lambda ctx: default_train_step(ctx), verbose=False),
        ValueError, "default training step")
    # ... while the default step may monitor a declared training metric.
    model.train(custom_monitor, verbose=False)
    assert (tmp_path / "runs").is_dir()


def test_an_nll_loss_with_a_regression_task_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"NEGATIVE_LOG_LIKELIHOOD|NLLLoss|regression"):
        NNModel(net_params=NNParams(input_dim=4, output_dim=1),
                params=NNModelParams(device=Devices.CPU, loss=Losses.NEGATIVE_LOG_LIKELIHOOD,
                                     task=TaskSpec.regression(1)))
    assert list(tmp_path.iterdir()) == []


def test_an_existing_run_is_refused_and_left_byte_for_byte(tmp_path):
    root = tmp_path / "runs"
    params = NNTrainParams(n_epochs=2, train_loader=_loader(), val_loader=_loader(), optim=sgd(),
                           scheduler=None)
    first = make_model().train(params, root=root, verbose=False)
    before = files_of(root)
    assert f"{first.id}/run.yaml" in before and f"{first.id}/checkpoints/last.pt" in before
    again = make_model(seed=5)
    with pytest.raises(RunExistsError, match=first.id):
        again.train(params, root=root, verbose=False)
    assert files_of(root) == before
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == sorted(
        ["best", first.id])


def test_a_declared_max_metric_monitor_is_read_the_same_way_by_early_stopping(tmp_path):
    accuracies = [0.5, 0.6, 0.55]  # a declared accuracy's natural direction is "max"
    params = NNTrainParams(n_epochs=3, train_loader=_loader(), val_loader=_loader(),
                           optim=sgd(), metrics=[MetricSpec("accuracy", name="acc")],
                           monitor=MonitorSpec(metric="acc"), scheduler=None)
    stopper = EarlyStopping(monitor=MonitorSpec(metric="acc"), patience=5)
    waits: list[int] = []

    class Probe(Callback):
        def on_epoch_end(self, ctx):
            waits.append(stopper.wait)

    run = make_model().train(params, eval_step_fn=_scripted_eval(accuracies, "acc"),
                             callbacks=[stopper, Probe()], root=tmp_path / "runs", verbose=False)
    assert [r.selection["improved"] for r in run.epoch_records()] == [True, True, False]
    assert [r.selection["direction"] for r in run.epoch_records()] == ["max"] * 3
    assert waits == [0, 0, 1]
    assert run.best_checkpoint().epoch == 1


# -- NLLLoss on logits --------------------------------------------------------------------


def test_nll_model_trains_like_cross_entropy_from_the_same_weights(tmp_path):
    x, y = data(12, seed=3)
    loader = chunks(x, y, [6, 6])
    ce, nll = make_model(seed=11), make_model(seed=11, loss=Losses.NEGATIVE_LOG_LIKELIHOOD)
    for key, value in weights(ce).items():
        assert torch.equal(value, weights(nll)[key])
    with torch.no_grad():
        expected_first = float(F.cross_entropy(ce.net(x[:6]), y[:6]))

    runs = []
    for model, name in ((ce, "ce"), (nll, "nll")):
        runs.append(model.train(NNTrainParams(n_epochs=2, train_loader=loader, val_loader=loader,
                                              optim=sgd(0.3), scheduler=None),
                                root=tmp_path / name, verbose=False))
    ce_run, nll_run = runs
    assert nll_run.idps[0].train_edp.loss == pytest.approx(expected_first, rel=1e-6)
    assert nll_run.idps[0].train_edp.loss > 0
    for a, b in zip(ce_run.idps, nll_run.idps, strict=True):
        assert b.train_edp.loss == pytest.approx(a.train_edp.loss, rel=1e-5)
    for key, value in weights(ce).items():
        torch.testing.assert_close(weights(nll)[key], value, atol=1e-6, rtol=1e-5)
    assert nll.evaluate(loader).loss == pytest.approx(ce.evaluate(loader).loss, rel=1e-5)
    assert nll.evaluate(loader).accuracy == ce.evaluate(loader).accuracy


# -- NNModel inference helpers -------------------------------------------------------------


def _modes(model: NNModel) -> list[tuple[str, bool]]:
    return [(name, module.training) for name, module in model.net.named_modules()]


def test_predict_and_evaluate_after_training_restore_every_submodule_mode(tmp_path):
    x, y = data(16)
    model = make_model(dropout=0.5)
    model.train(NNTrainParams(n_epochs=1, train_loader=chunks(x, y, [8, 8]), optim=sgd(),
                              scheduler=None), root=tmp_path / "runs", verbose=False)
    model.net.train()
    model.net.dropouts[0].eval()  # a mixed tree: root training, one Dropout frozen in eval
    before = _modes(model)
    assert before[0] == ("", True) and ("dropouts.0", False) in before

    first = model.predict(x).logits
    assert _modes(model) == before
    assert torch.equal(model.predict(x).logits, first)  # eval mode inside: no dropout noise
    model.evaluate(chunks(x, y, [8, 8]))
    assert _modes(model) == before
    model.predict_proba(x, ProbabilitySpec("categorical"))
    assert _modes(model) == before
    with pytest.raises(ValueError):
        model.predict(torch.randn(3, 5))  # wrong width: the body raises
    assert _modes(model) == before


def test_predict_proba_of_a_categorical_task_sums_to_one():
    model = make_model(task=TaskSpec.categorical(3))
    x, _ = data(7)
    result = model.predict_proba(x)
    assert result.probabilities is not None
    torch.testing.assert_close(result.probabilities.sum(dim=1), torch.ones(7))
    torch.testing.assert_close(result.probabilities,
                               torch.softmax(model.predict(x).logits, dim=1))
    assert result.class_indices.tolist() == model.predict(x).classes.tolist()


def test_predict_proba_over_a_shuffling_loader_warns_and_a_sequential_one_does_not():
    # §3.1: an ordinary loader's sample ids are iteration positions; a shuffling loader warns.
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

    model = make_model(task=TaskSpec.categorical(3))
    x, y = data(10)
    dataset = TensorDataset(x, y)
    shuffled = DataLoader(dataset, batch_size=4, shuffle=True,
                          generator=torch.Generator().manual_seed(0))
    assert isinstance(shuffled.sampler, RandomSampler)
    with pytest.warns(RuntimeWarning, match=r"predict_proba: the DataLoader shuffles "
                                            r"\(RandomSampler\), so sample_ids are iteration"):
        result = model.predict_proba(shuffled)
    assert result.sample_ids.tolist() == list(range(10))  # positions, as the warning says
    batched = DataLoader(dataset, batch_sampler=BatchSampler(
        RandomSampler(dataset), batch_size=4, drop_last=False))
    with pytest.warns(RuntimeWarning, match=r"shuffles \(RandomSampler\)"):
        model.predict_proba(batched)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all for these
        ordered = model.predict_proba(DataLoader(dataset, batch_size=4))
        model.predict_proba(x)
        model.predict_proba(chunks(x, y, [4, 6]))
    assert ordered.sample_ids.tolist() == list(range(10))
    torch.testing.assert_close(ordered.logits, model.predict(x).logits)


def test_from_checkpoint_best_reproduces_evaluate_at_that_epoch(tmp_path):
    x, y = data(24, seed=4)
    train, val = chunks(x[:16], y[:16], [8, 8]), chunks(x[16:], y[16:], [8])
    errors = [0.5, 0.1, 0.3, 0.4]  # BEST is epoch 1, not the last epoch

    def evaluate(ctx):
        record = ctx.model.evaluate(ctx.val_loader)
        return NNEvaluationDataPoint(loss=record.loss, error=errors[ctx.epoch_idx],
                                     accuracy=record.accuracy)

    model = make_model()
    run = model.train(NNTrainParams(n_epochs=4, train_loader=train, val_loader=val,
                                    optim=sgd(0.5), scheduler=None),
                      eval_step_fn=evaluate, root=tmp_path / "runs", verbose=False)
    best_path = tmp_path / "runs" / run.id / "checkpoints" / "best.pt"
    assert NNCheckpoint.from_file(best_path).epoch == 1
    restored = NNModel.from_checkpoint(best_path)
    at_best = run.epoch_records()[1].val_edp
    again = restored.evaluate(val)
    assert again.loss == pytest.approx(at_best.loss, rel=1e-6)
    assert again.accuracy == at_best.accuracy
    assert model.evaluate(val).loss != pytest.approx(at_best.loss, rel=1e-6)  # weights moved on


# -- the control-signal walk rejects non-finite values loudly ------------------------------


def test_a_nan_validation_error_falls_through_with_one_warning_per_epoch(tmp_path):
    def evaluate(ctx):
        return NNEvaluationDataPoint(error=math.nan, loss=[0.9, 0.5, 0.7][ctx.epoch_idx])

    with pytest.warns(RuntimeWarning) as caught:
        run = make_model().train(
            NNTrainParams(n_epochs=3, train_loader=_loader(), val_loader=_loader(), optim=sgd(),
                          scheduler=None),
            eval_step_fn=evaluate, root=tmp_path / "runs", verbose=False)
    rejected = [w for w in caught if "val_edp.error" in str(w.message)]
    assert len(rejected) == 3
    assert all("val_edp.loss" in str(w.message) for w in rejected)
    best = run.best_checkpoint()
    assert best is not None and best.epoch == 1 and best.score == pytest.approx(0.5)


# -- the step and evaluation hooks ---------------------------------------------------------


def test_eval_step_fn_runs_once_per_epoch_in_eval_mode_without_grad(tmp_path):
    calls = []
    val = _loader()

    def evaluate(ctx):
        calls.append({"grad": torch.is_grad_enabled(), "training": ctx.model.net.training,
                      "epoch": ctx.epoch_idx, "loader": ctx.val_loader is val,
                      "metrics": tuple(m.label for m in ctx.metrics)})
        return NNEvaluationDataPoint(loss=0.5, extra={"custom": 1.5})

    class Modes(Callback):
        def on_epoch_end(self, ctx):
            calls.append({"after": ctx.model.net.training})

    run = make_model().train(
        NNTrainParams(n_epochs=2, train_loader=_loader(), val_loader=val, optim=sgd(),
                      metrics=[MetricSpec("nll")], scheduler=None),
        eval_step_fn=evaluate, callbacks=[Modes()], root=tmp_path / "runs", verbose=False)
    expected = {"grad": False, "training": False, "loader": True, "metrics": ("nll",)}
    assert calls == [{**expected, "epoch": 0}, {"after": True},
                     {**expected, "epoch": 1}, {"after": True}]
    assert [r.val_edp.extra for r in run.epoch_records()] == [{"custom": 1.5}] * 2
    assert NNRun.load(run.id, root=tmp_path / "runs").epoch_records()[1].val_edp.extra == {
        "custom": 1.5}


def test_the_step_context_carries_the_knobs_and_set_epoch_is_called(tmp_path):
    seen = []

    class EpochLoader(list):
        def set_epoch(self, epoch):
            seen.append(("set_epoch", epoch))

    def step(ctx):
        seen.append((ctx.epoch, ctx.batch_idx, ctx.accumulate_grad_batches, ctx.grad_clip_norm,
                     ctx.scaler, ctx.window.closes))
        with pytest.raises(ValueError, match="without a name"):
            ctx.report_update("generator")
        return default_train_step(ctx)

    optim = NNOptimParams.builder().sgd(max_lr=0.1).grad_clip(0.5).accumulate_grad(2).build()
    run = make_model().train(NNTrainParams(n_epochs=2, train_loader=EpochLoader(_loader()),
                                           optim=optim, scheduler=None),
                             train_step_fn=step, root=tmp_path / "runs", verbose=False)
    assert seen == [("set_epoch", 0), (0, 0, 2, 0.5, None, False), (0, 1, 2, 0.5, None, True),
                    ("set_epoch", 1), (1, 0, 2, 0.5, None, False), (1, 1, 2, 0.5, None, True)]
    assert [i.update_count for i in run.idps] == [0, 1, 1, 2]


def test_the_spec_import_line_works_in_a_fresh_interpreter():
    # §6.4's own example import; nnx.params and nnx.metrics / nnx.monitors import each
    # other's modules, which must not be a circular import whichever is loaded first.
    script = """
import importlib, sys, torch
for line in ("from nnx import EarlyStopping, MetricSpec, MonitorSpec, NNTrainParams",
             "import nnx.monitors", "import nnx.metrics", "import nnx.params"):
    for name in [m for m in sys.modules if m == "nnx" or m.startswith("nnx.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    exec(line)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr


# -- the whole-epoch training summary --------------------------------------------------------


def test_the_default_steps_epoch_summary_weights_each_batch_by_its_denominator(tmp_path):
    x, y = data(12, seed=5)
    parts = chunks(x, y, [3, 5, 4])
    run = make_model().train(
        NNTrainParams(n_epochs=2, train_loader=parts, optim=sgd(0.2), metrics=[MetricSpec("nll")],
                      monitor=MonitorSpec(metric="loss", split="train"), scheduler=None),
        root=tmp_path / "runs", verbose=False)
    for epoch in (0, 1):
        records = [i for i in run.idps if i.epoch == epoch]
        assert all(i.train_summary is None for i in records[:-1])
        summary = records[-1].train_summary
        losses = [i.train_edp.loss for i in records]
        expected = sum(loss * n for loss, n in zip(losses, [3, 5, 4], strict=True)) / 12
        assert summary.loss == pytest.approx(expected, rel=1e-9)
        assert summary.loss != pytest.approx(sum(losses) / 3, rel=1e-6)  # not a mean of means
        assert summary.metrics["nll"] == pytest.approx(summary.loss, rel=1e-5)  # whole epoch
        assert records[-1].selection["value"] == pytest.approx(summary.loss)


def test_a_custom_steps_epoch_summary_weights_by_count_or_batch_size(tmp_path):
    x, y = data(12, seed=5)
    parts = chunks(x, y, [3, 5, 4])
    scripted = {0: [(1.0, None), (2.0, None), (3.0, None)], 1: [(0.5, 1), (1.0, 1), (2.0, 2)]}

    def step(ctx):
        default_train_step(ctx)
        loss, count = scripted[ctx.epoch][ctx.batch_idx]
        return NNEvaluationDataPoint(loss=loss, error=loss / 10, count=count)

    run = make_model().train(
        NNTrainParams(n_epochs=2, train_loader=parts, optim=sgd(),
                      monitor=MonitorSpec(metric="loss", split="train"), scheduler=None),
        train_step_fn=step, root=tmp_path / "runs", verbose=False)
    first, second = run.epoch_records()
    assert first.train_summary.loss == pytest.approx((3 + 10 + 12) / 12)
    assert first.train_summary.error == pytest.approx((3 + 10 + 12) / 120)
    assert second.train_summary.loss == pytest.approx((0.5 + 1 + 4) / 4)
    assert [r.selection["improved"] for r in (first, second)] == [True, True]
    assert run.best_checkpoint().epoch == 1
