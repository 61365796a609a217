"""Scheduler state across a resume (spec §2.5, §8.4, §14.1, §14.3): the nnx.scheduler_clock
component of an update-clock schedule, and budgets a stateful resume refuses."""

from __future__ import annotations

import hashlib
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from torch.optim import lr_scheduler

from nnx import (
    Callback,
    NNCheckpoint,
    NNModel,
    NNParams,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainParams,
    Trainer,
    supervised_objective,
)
from nnx.components import ComponentRestoreError


def update_clock(builder) -> NNSchedulerParams:
    return builder.clock("optimizer_update").build()


def plan(schedule: NNSchedulerParams, n_epochs: int = 2, **kw) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=tiny_batches(2), optim=sgd(),
                         scheduler=schedule, seed=0, **kw)


def files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and ".lock" not in p.name}


def snapshot(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def rng() -> tuple:
    state = np.random.get_state()
    return random.getstate(), torch.get_rng_state().tolist(), state[1].tolist(), state[2:]


class Scheduler(Callback):
    def on_train_begin(self, ctx):
        self.scheduler = ctx.scheduler


def refused(tmp_path: Path, params: NNTrainParams, match: str) -> None:
    """``params`` is refused before the model, the RNG or a file changes."""
    model = tiny_model(seed=5)
    before, before_files, before_rng = snapshot(model), files(tmp_path), rng()
    with pytest.raises(ComponentRestoreError, match=match):
        model.train(params, verbose=False, root=tmp_path)
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())
    assert files(tmp_path) == before_files and rng() == before_rng


# -- nnx.scheduler_clock ------------------------------------------------------------------------


def test_an_update_clock_schedule_resumes_through_its_scheduler_clock_component(tmp_path):
    schedule = update_clock(NNSchedulerParams.builder().cosine_annealing(T_max=8))
    first = tiny_model().train(plan(schedule), verbose=False, root=tmp_path)
    saved = NNCheckpoint.load_training_state(first.id, root=tmp_path)["components"]
    assert saved["nnx.scheduler_clock"] == {
        "version": 1, "required": True,
        "state": {"clock": "optimizer_update", "owner": None, "budget": 8, "explicit": True,
                  "steps": 4}}
    rest = tiny_model().train(plan(schedule, resume_from_run_id=first.id), verbose=False,
                              root=tmp_path)
    assert "nnx.scheduler_clock" in rest.resume_status.restored_components
    # An epoch-clock schedule has no clock component.
    epoch = tiny_model().train(plan(NNSchedulerParams.builder().cosine_annealing().build()),
                               verbose=False, root=tmp_path)
    assert "nnx.scheduler_clock" not in NNCheckpoint.load_training_state(
        epoch.id, root=tmp_path)["components"]


def test_a_trainer_checkpoints_one_scheduler_clock_per_optimizer(tmp_path):
    schedule = update_clock(NNSchedulerParams.builder().cosine_annealing(T_max=8))

    def trainer_plan(**resume) -> NNTrainerParams:
        builder = (NNTrainerParams.builder().n_epochs(1).train_loader(tiny_batches(2)).seed(0)
                   .optimizer("main", sgd()).scheduler("main", schedule))
        if resume:
            builder.resume_from(resume["source"], checkpoint="last", mode="stateful")
        return builder.build()

    first = Trainer(tiny_model()).train(trainer_plan(), objective=supervised_objective(),
                                        verbose=False, root=tmp_path)
    saved = NNCheckpoint.load_training_state(first.id, root=tmp_path)["components"]
    assert saved["nnx.scheduler_clock.main"]["state"]["owner"] == "main"
    probe = Scheduler()
    rest = Trainer(tiny_model()).train(trainer_plan(source=first.id),
                                       objective=supervised_objective(), callbacks=[probe],
                                       verbose=False, root=tmp_path)
    assert "nnx.scheduler_clock.main" in rest.resume_status.restored_components
    assert probe.scheduler is None  # a Trainer's schedulers are named (§14.3)


def test_a_mismatched_update_clock_budget_is_refused_before_anything_is_restored(tmp_path):
    first = tiny_model().train(
        plan(update_clock(NNSchedulerParams.builder().cosine_annealing(T_max=8))),
        verbose=False, root=tmp_path)
    refused(tmp_path, plan(update_clock(NNSchedulerParams.builder().cosine_annealing(T_max=12)),
                           resume_from_run_id=first.id),
            r"nnx\.scheduler_clock: budget: saved 8 update\(s\), now 12 \(explicit\)")
    # The planned default of another session length is another budget too (§14.2).
    refused(tmp_path, plan(update_clock(NNSchedulerParams.builder().cosine_annealing()),
                           n_epochs=1, resume_from_run_id=first.id),
            r"budget: saved 8 update\(s\), now 2 \(the planned default\)")


def test_a_checkpoint_without_component_state_is_refused_for_an_update_clock(
        tmp_path, monkeypatch):
    from nnx._engine.epoch_commit import EpochCommit

    schedule = update_clock(NNSchedulerParams.builder().cosine_annealing(T_max=8))
    training_state = EpochCommit.training_state

    def older(self, epoch, streams=None):  # a sidecar from before component state
        state = training_state(self, epoch, streams)
        del state["components"]
        return state

    with monkeypatch.context() as patch:
        patch.setattr(EpochCommit, "training_state", older)
        first = tiny_model().train(plan(schedule), verbose=False, root=tmp_path)
    refused(tmp_path, plan(schedule, resume_from_run_id=first.id),
            "no component state, so its scheduler position counts epochs")
    tiny_model().train(plan(schedule, resume_from_run_id=first.id, resume_mode="weights_only"),
                       verbose=False, root=tmp_path)  # a fresh schedule is fine


# -- a cosine's T_max on the epoch clock --------------------------------------------------------


def test_a_cosine_resumed_with_another_t_max_than_its_parents_period_is_refused(tmp_path):
    first = tiny_model().train(plan(NNSchedulerParams.builder().cosine_annealing().build()),
                               verbose=False, root=tmp_path)  # the default period: 2 epochs
    refused(tmp_path, plan(NNSchedulerParams.builder().cosine_annealing(T_max=5).build(),
                           resume_from_run_id=first.id),
            r"optimizer schedule T_max: saved 2, now 5")
    # The same period set explicitly, or left to default, resumes; both keep the period 2.
    # Past the period, only the default one warns (§2.5: an explicit T_max is chosen).
    for t_max in (2, None):
        probe = Scheduler()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            tiny_model().train(
                plan(NNSchedulerParams.builder().cosine_annealing(T_max=t_max).build(),
                     n_epochs=3, resume_from_run_id=first.id),
                callbacks=[probe], verbose=False, root=tmp_path)
        assert probe.scheduler.T_max == 2
        warned = [w for w in caught if "passed its T_max (2)" in str(w.message)]
        assert len(warned) == (0 if t_max else 1)


# -- NNModel._build_scheduler ---------------------------------------------------------------------


class Chained(NNModel):
    """Overrides the schedule NNx builds: a ChainedScheduler (halve, then x0.9)."""

    built: list[tuple[int, int | None]]

    def _build_scheduler(self, optimizer, params, n_epochs, *, updates_per_epoch=None,
                         plateau_rule=None):
        self.built = [*getattr(self, "built", []), (n_epochs, updates_per_epoch)]
        return lr_scheduler.ChainedScheduler([lr_scheduler.StepLR(optimizer, 1, gamma=0.5),
                                              lr_scheduler.ExponentialLR(optimizer, 0.9)])


class Plateau(NNModel):
    def _build_scheduler(self, optimizer, params, n_epochs, **kw):
        return lr_scheduler.ReduceLROnPlateau(optimizer)


class NotAScheduler(NNModel):
    def _build_scheduler(self, optimizer, params, n_epochs, **kw):
        return object()


def custom(cls: type[NNModel]) -> NNModel:
    torch.manual_seed(0)
    return cls(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)))


def test_a_build_scheduler_override_is_what_the_run_steps_and_checkpoints(tmp_path):
    model, probe = custom(Chained), Scheduler()
    step = NNSchedulerParams.builder().step(step_size=1).build()  # replaced by the override
    run = model.train(NNTrainParams(n_epochs=3, train_loader=tiny_batches(2), optim=sgd(0.1),
                                    scheduler=step), callbacks=[probe], verbose=False,
                      root=tmp_path)
    assert model.built == [(3, 2)]
    assert isinstance(probe.scheduler, lr_scheduler.ChainedScheduler)
    # Stepped once per epoch: each step halves and then takes 0.9 of the rate.
    assert [r.lr for r in run.epoch_records()] == pytest.approx([0.1, 0.045, 0.02025])
    saved = NNCheckpoint.load_training_state(run.id, root=tmp_path)["schedule"]["scheduler"]
    assert saved == probe.scheduler.state_dict()
    # The Trainer builds its named schedules through the same hook.
    trainer = custom(Chained)
    Trainer(trainer).train(NNTrainerParams.builder().n_epochs(1).train_loader(tiny_batches(2))
                           .optimizer("main", sgd()).scheduler("main", step).build(),
                           objective=supervised_objective(), verbose=False, root=tmp_path)
    assert trainer.built == [(1, 2)]


@pytest.mark.parametrize(("cls", "error", "message"), [
    (Chained, ValueError, "a ChainedScheduler has no last_epoch position, so it cannot run on "
                          "the 'optimizer_update' clock"),
    (Plateau, ValueError, "a ReduceLROnPlateau reads a monitored metric at the epoch boundary"),
    (NotAScheduler, TypeError, "_build_scheduler must return a scheduler"),
])
def test_a_build_scheduler_override_the_clock_cannot_step_is_refused_before_any_run(
        tmp_path, cls, error, message):
    model = custom(cls)
    before = snapshot(model)
    schedule = update_clock(NNSchedulerParams.builder().step(step_size=1))
    with pytest.raises(error, match=message):
        model.train(plan(schedule), verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())
