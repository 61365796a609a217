"""The Trainer's scheduler clocks (spec §2.5, §8): an update clock steps per report of its
own optimizer; without auto-stepping only the step function moves it; LRMonitor's trace."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import yaml
from _nnx_core_tiny import tiny_batches, tiny_model
from _support.trainer import (
    _group,
    _halving,
    _lr,
    full,
    gan_model,
    mixture,
    )

from nnx import (
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNRun,
    NNSchedulerParams,
    NNTrainerParams,
    Trainer,
    TrainerStepContext,
)


class ReportingStep:
    """Per batch: two D updates, then one G update, each reported by name.

    ``trace`` holds (epoch, name, G's LR, D's LR) right after each report.
    With ``own_schedule`` the step also steps G's schedule itself after each
    G update (the §8.2 hand-over under auto_step_schedulers=False).
    """

    def __init__(self, *, own_schedule: bool = False) -> None:
        self.own_schedule = own_schedule
        self.trace: list[tuple[int, str, float, float]] = []

    def __call__(self, ctx: TrainerStepContext) -> NNEvaluationDataPoint:
        net = ctx.model.net
        (real,) = ctx.batch
        opt_g, opt_d = ctx.optimizers["G"], ctx.optimizers["D"]
        if ctx.epoch == 0 and ctx.batch_idx == 0:
            with pytest.raises(ValueError, match=full(
                    "report_update: no optimizer named 'X' (optimizers: 'G', 'D')")):
                ctx.report_update("X")
        loss = torch.zeros(())
        for name in ("D", "D", "G"):
            optimizer = ctx.optimizers[name]
            optimizer.zero_grad()
            loss = net.D(real).pow(2).mean() + net.D(net.G(torch.randn(len(real), 2))).mean()
            loss.backward()
            optimizer.step()
            ctx.report_update(name)
            if name == "G" and self.own_schedule:
                ctx.schedulers["G"].step()
            self.trace.append((ctx.epoch, name, _lr(opt_g), _lr(opt_d)))
        return NNEvaluationDataPoint(loss=float(loss.detach()))


def _clocked(**values: Any) -> NNTrainerParams:
    builder = (NNTrainerParams.builder().n_epochs(2).train_loader(mixture()).seed(0)
               .optimizer("G", _group("G.*")).optimizer("D", _group("D.*"))
               .scheduler("G", _halving("optimizer_update")).scheduler("D", _halving("epoch")))
    for key, value in values.items():
        getattr(builder, key)(value)
    return builder.build()


def test_an_update_clock_steps_once_per_report_of_its_own_optimizer(tmp_path):
    step = ReportingStep()
    run = Trainer(gan_model()).train(_clocked(), trainer_step_fn=step, verbose=False,
                                     root=tmp_path)
    expected, g_updates = [], 0
    for epoch in range(2):
        for _batch in range(4):
            for name in ("D", "D", "G"):
                g_updates += name == "G"
                expected.append((epoch, name, 0.1 * 0.5 ** g_updates, 0.1 * 0.5 ** epoch))
    assert step.trace == expected  # D's reports never step G's clock; D steps per epoch
    state = NNCheckpoint.load_training_state(run.id, root=tmp_path)
    assert state is not None
    g, d = state["optimizers"]["G"], state["optimizers"]["D"]
    updates = state["components"]["nnx.update_engine"]["state"]["optimizer_updates"]
    assert (updates["G"], g["schedule"]["steps"], g["schedule"]["clock"]) == (
        8, 8, "optimizer_update")
    assert (updates["D"], d["schedule"]["steps"], d["schedule"]["clock"]) == (16, 2, "epoch")
    assert _lr_of(run, "D") == 0.1 * 0.5 ** 2
    assert run.idps[-1].update_count == 24


def _lr_of(run: NNRun, name: str) -> float:
    state = NNCheckpoint.load_training_state(run.id, root=run.root)
    assert state is not None
    return float(state["optimizers"][name]["optimizer"]["param_groups"][0]["lr"])


def test_without_auto_stepping_only_the_step_function_moves_a_schedule(tmp_path):
    hands_off = ReportingStep()
    run = Trainer(gan_model()).train(_clocked(auto_step_schedulers=False),
                                     trainer_step_fn=hands_off, verbose=False,
                                     root=tmp_path / "a")
    assert {(g, d) for _, _, g, d in hands_off.trace} == {(0.1, 0.1)}  # nothing stepped
    assert (_lr_of(run, "G"), _lr_of(run, "D")) == (0.1, 0.1)
    assert yaml.safe_load((run.path / "run.yaml").read_text())["trainer"][
        "auto_step_schedulers"] is False

    own = ReportingStep(own_schedule=True)
    run = Trainer(gan_model()).train(_clocked(auto_step_schedulers=False),
                                     trainer_step_fn=own, verbose=False, root=tmp_path / "b")
    g_steps, expected = 0, []
    for epoch in range(2):
        for _batch in range(4):
            for name in ("D", "D", "G"):
                g_steps += name == "G"
                expected.append((epoch, name, 0.1 * 0.5 ** g_steps, 0.1))
    assert own.trace == expected  # exactly the function's own steps; D never at the epoch end
    state = NNCheckpoint.load_training_state(run.id, root=tmp_path / "b")
    assert state is not None
    g, d = state["optimizers"]["G"]["schedule"], state["optimizers"]["D"]["schedule"]
    assert (g["scheduler"]["last_epoch"], d["scheduler"]["last_epoch"]) == (8, 0)
    assert (g["steps"], d["steps"]) == (0, 0)  # NNx took none of them


@pytest.mark.parametrize("auto", [True, False])
def test_lr_monitor_traces_the_primary_update_clock_unless_the_step_owns_timing(tmp_path, auto):
    """§5: LRMonitor.update_history follows the primary (sorted-first) optimizer's
    update-clock steps; under auto_step_schedulers=False NNx steps nothing, so it stays
    empty while the per-epoch history still records the LR."""
    from nnx import LRMonitor

    clock = NNSchedulerParams.builder().step(step_size=1, factor=0.5).clock(
        "optimizer_update").build()

    def step(ctx: TrainerStepContext) -> NNEvaluationDataPoint:
        for name in ("a", "b"):
            ctx.optimizers[name].step()
            ctx.report_update(name)
        return NNEvaluationDataPoint(loss=1.0)

    monitor = LRMonitor()
    params = (NNTrainerParams.builder().n_epochs(2).train_loader(tiny_batches(2))
              .optimizer("a", _group("layers.0.*", 0.4)).optimizer("b", _group("layers.1.*"))
              .scheduler("a", clock).auto_step_schedulers(auto).build())
    Trainer(tiny_model()).train(params, trainer_step_fn=step, callbacks=[monitor],
                                root=tmp_path, verbose=False)
    if auto:
        assert monitor.update_history == [(1, 0.2), (3, 0.1), (5, 0.05), (7, 0.025)]
        assert monitor.history == pytest.approx([0.1, 0.025])
    else:
        assert monitor.update_history == [] and monitor.history == [0.4, 0.4]
