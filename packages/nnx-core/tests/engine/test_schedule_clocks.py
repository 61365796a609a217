"""Scheduler clocks and budgets in the loop (spec §2.5, §5, §6.1)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from _nnx_core_tiny import sgd
from _support.schedule_clocks import TrainedAt, loader, make_model

from nnx import (
    Devices,
    LRMonitor,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
    Precision,
    ScheduleExhaustedError,
    Schedulers,
    default_train_step,
)
from nnx._persistence.checkpoint import checkpoint_files


class ShortLen:
    """A loader whose len() under-reports what it yields (as a multi-worker
    IterableDataset can)."""

    def __init__(self, batches: list[tuple[torch.Tensor, ...]], reported: int) -> None:
        self.batches, self.reported = batches, reported

    def __len__(self) -> int:
        return self.reported

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        return iter(self.batches)


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def update_clock(builder) -> NNSchedulerParams:
    return builder.clock("optimizer_update").build()


def schedule_state(root: Path) -> tuple[int, int]:
    """(horizon, steps) of the schedule LAST holds, for the one run under ``root``."""
    (run_dir,) = [p for p in root.iterdir() if p.name != "best" and not p.name.startswith(".")]
    saved = NNCheckpoint.load_training_state(run_dir.name, root=root)["schedule"]
    return saved["horizon"], saved["steps"]


def checkpoint_epochs(run_dir: Path) -> dict[str, int]:
    return {p.name[:-3]: NNCheckpoint.from_file(p).epoch
            for p in checkpoint_files(run_dir / "checkpoints")}


def test_warmup_steps_may_be_left_to_its_default_without_changing_explicit_run_ids():
    default = NNSchedulerParams(kind=Schedulers.LINEAR_WARMUP_DECAY)
    assert NNSchedulerParams.builder().linear_warmup_decay().build() == default
    assert default.warmup_steps is None and "warmup_steps" not in default.state()
    explicit = NNSchedulerParams.builder().linear_warmup_decay(warmup_steps=3).build()
    assert explicit.state()["warmup_steps"] == 3  # set values serialize as before


@pytest.mark.parametrize(("n_epochs", "lrs"), [
    # warm-up max(1, 5 // 10) = 1 epoch, then linear decay to 0 at epoch 5
    (5, [0.1, 0.1, 0.075, 0.05, 0.025]),
    # warm-up max(1, 20 // 10) = 2 epochs: 0.05, 0.1, then 0.1 decaying over 18 epochs
    (20, [0.05, 0.1, 0.1, 0.1 * 17 / 18]),
])
def test_the_default_warmup_is_a_tenth_of_the_sessions_epochs(tmp_path, n_epochs, lrs):
    params = NNTrainParams(n_epochs=n_epochs, train_loader=loader(1), optim=sgd(0.1),
                           scheduler=NNSchedulerParams.builder().linear_warmup_decay().build())
    run = make_model().train(params, root=tmp_path / "runs", verbose=False)
    assert [i.lr for i in run.idps][:len(lrs)] == pytest.approx(lrs, abs=1e-12)


def test_on_the_update_clock_each_record_shows_the_rate_its_update_used(tmp_path):
    # 5 batches in windows of 2 + 2 + 1: three updates an epoch, each halving the rate.
    probe = TrainedAt()
    params = NNTrainParams(n_epochs=2, train_loader=loader(5),
                           optim=sgd(0.1, accumulate=2),
                           scheduler=update_clock(NNSchedulerParams.builder().step(
                               step_size=1, factor=0.5)))
    run = make_model().train(params, callbacks=[probe], root=tmp_path / "runs",
                             verbose=False)
    used = [0.1 * 0.5 ** k for k in range(6)]
    assert probe.lrs == pytest.approx(used, abs=1e-15)
    # A microbatch of an open window shows the rate its window's update will use.
    assert [i.lr for i in run.idps] == pytest.approx(
        [0.1, 0.1, 0.05, 0.05, 0.025, 0.0125, 0.0125, 0.00625, 0.00625, 0.003125], abs=1e-15)
    # The epoch's record: the rate of its last update, not the next epoch's first.
    assert [r.lr for r in run.epoch_records()] == pytest.approx([0.025, 0.003125], abs=1e-15)


def test_the_default_warmup_on_the_update_clock_is_a_tenth_of_the_planned_updates(tmp_path):
    # 2 epochs x 10 batches = 20 planned updates: a warm-up of 2 updates.
    schedule = update_clock(NNSchedulerParams.builder().linear_warmup_decay())
    probe = TrainedAt()
    make_model().train(NNTrainParams(n_epochs=2, train_loader=loader(10), optim=sgd(0.1),
                                     scheduler=schedule),
                       callbacks=[probe], root=tmp_path / "runs", verbose=False)
    assert len(probe.lrs) == 20
    assert probe.lrs[:4] == pytest.approx([0.05, 0.1, 0.1, 0.1 * 17 / 18], abs=1e-12)


def test_an_epoch_clock_schedule_steps_once_per_epoch(tmp_path):
    schedule = NNSchedulerParams.builder().step(step_size=1, factor=0.5).build()
    assert schedule.clock == "epoch" and "clock" not in schedule.state()
    probe, monitor = TrainedAt(), LRMonitor()
    make_model().train(NNTrainParams(n_epochs=3, train_loader=loader(3), optim=sgd(0.2),
                                     scheduler=schedule),
                       callbacks=[probe, monitor], root=tmp_path / "runs", verbose=False)
    assert probe.lrs == pytest.approx([0.2] * 3 + [0.1] * 3 + [0.05] * 3)
    assert monitor.history == pytest.approx([0.1, 0.05, 0.025])
    assert monitor.update_history == []  # recorded on the update clock only


# -- budgets ------------------------------------------------------------------------------


class NoLen:
    """A re-iterable loader without a length: its update count is unknown up front."""

    def __init__(self, batches: list[tuple[torch.Tensor, ...]]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[tuple[torch.Tensor, ...]]:
        return iter(self.batches)


def test_an_explicit_total_steps_shorter_than_the_plan_is_refused_before_any_run(tmp_path):
    model = make_model()
    before = weights(model)
    for clock, total, message in (
            ("optimizer_update", 7, r"total_steps \(7\) is shorter than the plan: the "
             r"ONE_CYCLE schedule would take 10 optimizer update\(s\) \(2 epoch\(s\) x 5\)"),
            ("epoch", 1, r"total_steps \(1\) is shorter than the plan: the ONE_CYCLE schedule "
             r"would take 2 epoch\(s\)")):
        schedule = NNSchedulerParams.builder().one_cycle(total_steps=total).clock(clock).build()
        with pytest.raises(ValueError, match=message):
            model.train(NNTrainParams(n_epochs=2, train_loader=loader(5), optim=sgd(0.1),
                                      scheduler=schedule), root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert same_weights(weights(model), before)


def test_one_cycle_past_total_steps_stops_at_the_first_update_past_it(tmp_path):
    schedule = update_clock(NNSchedulerParams.builder().one_cycle(total_steps=7))
    probe = TrainedAt()
    # Without a length the 10 updates are not known up front: the run stops at the eighth.
    params = NNTrainParams(n_epochs=2, train_loader=NoLen(loader(5)), val_loader=loader(1),
                           optim=sgd(0.1), scheduler=schedule)
    model = make_model()
    with pytest.raises(ScheduleExhaustedError, match="total_steps"):
        model.train(params, callbacks=[probe], root=tmp_path / "runs", verbose=False)
    # Epoch 0 committed five updates; epoch 1 stopped at the eighth, never scheduled.
    assert len(probe.lrs) == 8
    assert probe.schedule.last_epoch == 6  # positions 0..6: seven scheduled updates
    run_dir = next(p for p in (tmp_path / "runs").iterdir()
                   if p.name != "best" and not p.name.startswith("."))
    epochs = checkpoint_epochs(run_dir)
    assert epochs["last"] == 0 and max(epochs.values()) == 0  # nothing for epoch 1
    assert {i.epoch for i in NNRun.load(run_dir.name, root=tmp_path / "runs").idps} == {0}


def test_the_default_budget_is_the_planned_updates(tmp_path):
    # Default budget: 2 epochs x ceil(5 / 2) = 6 updates; the run fits exactly.
    for kind, builder in (("one_cycle", NNSchedulerParams.builder().one_cycle()),
                          ("warmup", NNSchedulerParams.builder().linear_warmup_decay(
                              warmup_steps=2))):
        probe = TrainedAt()
        make_model().train(NNTrainParams(n_epochs=2, train_loader=loader(5),
                                         optim=sgd(0.1, accumulate=2),
                                         scheduler=update_clock(builder)),
                           callbacks=[probe], root=tmp_path / kind, verbose=False)
        assert len(probe.lrs) == 6
        assert schedule_state(tmp_path / kind) == (6, 6)


def test_a_loader_longer_than_its_len_exhausts_the_default_budget(tmp_path):
    short = ShortLen(loader(5), reported=3)  # default budget: 2 x 3 = 6 updates
    schedule = update_clock(NNSchedulerParams.builder().one_cycle())
    probe = TrainedAt()
    with pytest.raises(ScheduleExhaustedError):
        make_model().train(NNTrainParams(n_epochs=2, train_loader=short, optim=sgd(),
                                         scheduler=schedule),
                           callbacks=[probe], root=tmp_path / "runs", verbose=False)
    assert len(probe.lrs) == 7  # epoch 1's second update is the first one past the budget
    run_dir = next(p for p in (tmp_path / "runs").iterdir()
                   if p.name != "best" and not p.name.startswith("."))
    assert checkpoint_epochs(run_dir)["last"] == 0


def test_a_cosine_schedule_past_its_default_t_max_warns_once(tmp_path):
    short = ShortLen(loader(5), reported=2)  # default T_max: 2 x 2 = 4; the run takes 10
    schedule = update_clock(NNSchedulerParams.builder().cosine_annealing())
    with pytest.warns(RuntimeWarning, match="T_max") as caught:
        make_model().train(NNTrainParams(n_epochs=2, train_loader=short, optim=sgd(),
                                         scheduler=schedule),
                           root=tmp_path / "default", verbose=False)
    assert len([w for w in caught if "T_max" in str(w.message)]) == 1

    explicit = update_clock(NNSchedulerParams.builder().cosine_annealing(T_max=4))
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the period the run chose: silent
        make_model().train(NNTrainParams(n_epochs=2, train_loader=short, optim=sgd(),
                                         scheduler=explicit),
                           root=tmp_path / "explicit", verbose=False)


# -- refusals and warnings ------------------------------------------------------------------


def test_a_plateau_scheduler_refuses_the_update_clock():
    with pytest.raises(ValueError, match="plateau"):
        NNSchedulerParams(clock="optimizer_update")
    with pytest.raises(ValueError, match="plateau"):
        NNSchedulerParams.builder().reduce_on_plateau(patience=2).clock("optimizer_update").build()
    with pytest.raises(ValueError, match="plateau"):
        NNSchedulerParams(kind=Schedulers.REDUCE_LR_ON_PLATEAU, clock="optimizer_update")


def _custom_step(report: bool):
    def step(ctx):
        ctx.optimizer.zero_grad()
        (x,), y = ctx.model.split_batch(ctx.batch)
        loss = torch.nn.functional.cross_entropy(ctx.model.net(x), y)
        loss.backward()
        ctx.optimizer.step()
        if report:
            ctx.report_update()
        return NNEvaluationDataPoint(loss=float(loss.detach()))
    return step


def test_an_update_clock_with_a_custom_step_needs_an_explicit_budget(tmp_path):
    model = make_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    schedule = update_clock(NNSchedulerParams.builder().one_cycle())
    params = NNTrainParams(n_epochs=1, train_loader=loader(3), optim=sgd(), scheduler=schedule)
    with pytest.raises(ValueError, match="explicit"):
        model.train(params, train_step_fn=_custom_step(True), root=tmp_path / "runs",
                    verbose=False)
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())

    # default_train_step passed explicitly is still NNx owning the windows.
    probe = TrainedAt()
    model.train(params, train_step_fn=default_train_step, callbacks=[probe],
                root=tmp_path / "runs", verbose=False)
    assert schedule_state(tmp_path / "runs") == (3, 3)


def test_a_custom_step_steps_the_update_clock_only_on_reported_updates(tmp_path):
    schedule = update_clock(NNSchedulerParams.builder().step(step_size=1, factor=0.5))
    probe, monitor = TrainedAt(), LRMonitor()
    run = make_model().train(NNTrainParams(n_epochs=1, train_loader=loader(3), optim=sgd(0.4),
                                           scheduler=schedule),
                             train_step_fn=_custom_step(True), callbacks=[probe, monitor],
                             root=tmp_path / "runs", verbose=False)
    assert probe.lrs == pytest.approx([0.4, 0.2, 0.1])
    assert monitor.update_history == [(1, pytest.approx(0.2)), (2, pytest.approx(0.1)),
                                      (3, pytest.approx(0.05))]
    assert [i.update_count for i in run.idps] == [1, 2, 3]


def test_an_epoch_whose_custom_step_reports_no_update_warns(tmp_path):
    schedule = update_clock(NNSchedulerParams.builder().step(step_size=1, factor=0.5))
    probe = TrainedAt()
    with pytest.warns(RuntimeWarning, match="no optimizer update") as caught:
        run = make_model().train(NNTrainParams(n_epochs=2, train_loader=loader(2), optim=sgd(0.4),
                                               scheduler=schedule),
                                 train_step_fn=_custom_step(False), callbacks=[probe],
                                 root=tmp_path / "runs", verbose=False)
    assert len([w for w in caught if "no optimizer update" in str(w.message)]) == 2  # per epoch
    assert probe.lrs == pytest.approx([0.4] * 4)  # NNx never infers the updates it was not told
    assert [i.update_count for i in run.idps] == [0, 0, 0, 0]


def test_a_step_the_fp16_scaler_skips_is_not_an_update(tmp_path):
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                    params=NNModelParams(device=Devices.CPU, precision=Precision.FP16))
    calls = [0]

    def overflow_first(grad):  # the first backward overflows: the scaler must skip it
        calls[0] += 1
        return grad * math.inf if calls[0] == 1 else grad

    model.net.layers[0].weight.register_hook(overflow_first)
    steps: list[int] = []

    class CountSteps(TrainedAt):
        def on_train_begin(self, ctx):
            super().on_train_begin(ctx)
            ctx.optimizer.register_step_post_hook(lambda *_: steps.append(1))

    probe = CountSteps()
    schedule = update_clock(NNSchedulerParams.builder().step(step_size=1, factor=0.5))
    run = model.train(NNTrainParams(n_epochs=2, train_loader=loader(3), optim=sgd(0.1),
                                    scheduler=schedule),
                      callbacks=[probe], root=tmp_path / "runs", verbose=False)
    assert run.idps[0].update_count == 0  # the overflowing window took no step
    assert 0 < len(steps) < 6
    assert run.idps[-1].update_count == len(steps) == schedule_state(tmp_path / "runs")[1]
