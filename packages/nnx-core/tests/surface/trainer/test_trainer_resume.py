"""Warm resume of a Trainer run (spec §8.4, §14.1, §14.3): mismatches and a passed horizon
are refused before anything changes; a checkpoint resumes statefully only in its own loop."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from _support.trainer import (
    PLATEAU,
    GanStep,
    _group,
    _plan,
    adam,
    files,
    full,
    gan_builder,
    gan_model,
    mixture,
    rng,
    same_weights,
    weights,
)

from nnx import (
    Callback,
    NNCheckpoint,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainerParamsBuilder,
    NNTrainParams,
    Trainer,
    supervised_objective,
)
from nnx.components import ComponentRestoreError

GAN_OPTIMS = {"G": adam("G.*"), "D": adam("D.*")}


GAN_SCHEDULES = {"G": PLATEAU, "D": PLATEAU}


# == 5. §8.4 resume checks =====================================================================
def _warmup_decay() -> NNSchedulerParams:
    return NNSchedulerParams.builder().linear_warmup_decay(warmup_steps=1).build()


def _one_cycle() -> NNSchedulerParams:
    return NNSchedulerParams.builder().one_cycle(max_lr=1e-2).build()


def _step_lr() -> NNSchedulerParams:
    return NNSchedulerParams.builder().step(step_size=1).build()


RESUME_REFUSALS = {
    "optimizer_names": (
        {"G": adam("G.*"), "E": adam("D.*")}, {"G": PLATEAU, "E": PLATEAU},
        ComponentRestoreError, "optimizer names: saved ['D', 'G'], now ['E', 'G']"),
    "optimizer_type": (
        {**GAN_OPTIMS, "D": _group("D.*", lr=2e-3)}, GAN_SCHEDULES,
        ComponentRestoreError, "optimizer 'D': saved Adam, now SGD"),
    "scheduler_type": (
        GAN_OPTIMS, {**GAN_SCHEDULES, "D": _step_lr()},
        ComponentRestoreError, "optimizer 'D' schedule: saved REDUCE_LR_ON_PLATEAU, now STEP"),
    "schedule_dropped": (
        GAN_OPTIMS, {"G": PLATEAU}, ComponentRestoreError,
        "optimizer 'D' schedule: the checkpoint has a schedule (REDUCE_LR_ON_PLATEAU) and this "
        "run has none; resume with the same scheduler, or pass resume_mode='weights_only'"),
    "one_cycle_without_total_steps": (
        GAN_OPTIMS, {**GAN_SCHEDULES, "G": _one_cycle()}, ValueError,
        "resuming a ONE_CYCLE schedule needs an explicit total_steps covering the original "
        "and the resumed epochs (or resume_mode='weights_only')"),
    "warmup_decay_without_total_steps": (
        GAN_OPTIMS, {**GAN_SCHEDULES, "G": _warmup_decay()}, ValueError,
        "resuming a LINEAR_WARMUP_DECAY schedule needs an explicit total_steps covering the "
        "original and the resumed epochs (or resume_mode='weights_only')"),
}


@pytest.mark.parametrize("case", list(RESUME_REFUSALS))
def test_a_mismatched_resume_is_refused_before_anything_changes(tmp_path, case):
    first = Trainer(gan_model()).train(gan_builder(1).build(), trainer_step_fn=GanStep(),
                                       verbose=False, root=tmp_path)
    optims, schedules, error, message = RESUME_REFUSALS[case]
    builder = NNTrainerParams.builder().n_epochs(1).train_loader(mixture()).seed(0)
    for name, optim in optims.items():
        builder.optimizer(name, optim)
    for name, schedule in schedules.items():
        builder.scheduler(name, schedule)
    builder.resume_from(first.id, checkpoint="last", mode="auto")
    model = gan_model(seed=7)
    before, before_files, before_rng = weights(model), files(tmp_path), rng()
    step = GanStep()
    with pytest.raises(error) as info:
        Trainer(model).train(builder.build(), trainer_step_fn=step, verbose=False,
                             root=tmp_path)
    if error is ComponentRestoreError:
        assert info.value.problems == [message]
    else:
        assert str(info.value) == message
    assert step.checked == 0
    assert same_weights(weights(model), before)
    assert files(tmp_path) == before_files
    assert rng() == before_rng


def test_a_total_steps_the_resumed_epochs_would_pass_is_refused_before_anything_changes(
        tmp_path):
    one_cycle = NNSchedulerParams.builder().one_cycle(max_lr=1e-2, total_steps=3).build()

    def plan(n_epochs: int, source: str | None = None) -> NNTrainerParams:
        builder = (NNTrainerParams.builder().n_epochs(n_epochs).train_loader(mixture()).seed(0)
                   .optimizer("G", adam("G.*")).optimizer("D", adam("D.*"))
                   .scheduler("G", one_cycle))
        if source is not None:
            builder.resume_from(source, checkpoint="last", mode="auto")
        return builder.build()

    first = Trainer(gan_model()).train(plan(2), trainer_step_fn=GanStep(), verbose=False,
                                       root=tmp_path)
    model = gan_model(seed=7)
    before, before_files, before_rng = weights(model), files(tmp_path), rng()
    step = GanStep()
    with pytest.raises(ComponentRestoreError) as info:  # epochs 2 and 3 would take steps 3, 4
        Trainer(model).train(plan(2, first.id), trainer_step_fn=step, verbose=False,
                             root=tmp_path)
    assert info.value.problems == [
        "optimizer 'G' schedule total_steps (3) does not cover the resumed run: 2 epoch "
        "step(s) taken + 2 planned = 4"]
    assert step.checked == 0 and same_weights(weights(model), before)
    assert files(tmp_path) == before_files and rng() == before_rng
    rest = Trainer(model).train(plan(1, first.id), trainer_step_fn=step, verbose=False,
                                root=tmp_path)  # one more epoch fits exactly
    assert [r.epoch for r in rest.epoch_records()] == [2]


def test_the_same_horizon_check_covers_an_update_clock_under_nnmodel_train(tmp_path):
    one_cycle = (NNSchedulerParams.builder().one_cycle(max_lr=0.1, total_steps=4)
                 .clock("optimizer_update").build())

    def plan(**resume: Any) -> NNTrainParams:
        return NNTrainParams(n_epochs=resume.pop("n_epochs", 2), train_loader=tiny_batches(2),
                             optim=sgd(), scheduler=one_cycle, seed=0, **resume)

    first = tiny_model().train(plan(), verbose=False, root=tmp_path)  # 2 × 2 updates: all 4
    before_files = files(tmp_path)
    with pytest.raises(ComponentRestoreError) as info:
        tiny_model().train(plan(n_epochs=1, resume_from_run_id=first.id), verbose=False,
                           root=tmp_path)
    assert info.value.problems == [
        "optimizer schedule total_steps (4) does not cover the resumed run: 4 optimizer_update "
        "step(s) taken + 2 planned = 6"]
    assert files(tmp_path) == before_files


class FirstEpochWeights(Callback):
    def __init__(self) -> None:
        self.at_start: dict[str, torch.Tensor] | None = None

    def on_epoch_begin(self, ctx):
        if self.at_start is None:
            self.at_start = weights(ctx.model)


def _single(pattern: str = "*") -> NNTrainerParams:
    return _plan(("net", _group(pattern)))


def test_a_checkpoint_resumes_statefully_only_through_its_own_loop(tmp_path):
    model_run = tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2),
                                                 optim=sgd(), seed=0), verbose=False,
                                   root=tmp_path)
    trainer_run = Trainer(tiny_model()).train(_single(), objective=supervised_objective(),
                                              verbose=False, root=tmp_path)
    hint = "; pass resume_mode='weights_only' to warm-start from its weights alone"

    def trainer_params(source: str, mode: str) -> NNTrainerParams:
        builder = NNTrainerParamsBuilder.from_params(_single())
        return builder.resume_from(source, checkpoint="last", mode=mode).build()

    def model_params(source: str, mode: str) -> NNTrainParams:
        return NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd(), seed=0,
                             resume_from_run_id=source, resume_mode=mode)

    before_files = files(tmp_path)
    model = tiny_model(seed=3)
    before, before_rng = weights(model), rng()
    with pytest.raises(ValueError, match=full(
            "this checkpoint was written by NNModel.train and resumes statefully only through "
            "NNModel.train, not Trainer.train" + hint)):
        Trainer(model).train(trainer_params(model_run.id, "auto"),
                             objective=supervised_objective(), verbose=False, root=tmp_path)
    with pytest.raises(ValueError, match=full(
            "this checkpoint was written by Trainer.train and resumes statefully only through "
            "Trainer.train, not NNModel.train" + hint)):
        model.train(model_params(trainer_run.id, "stateful"), verbose=False, root=tmp_path)
    assert files(tmp_path) == before_files and same_weights(weights(model), before)
    assert rng() == before_rng

    for source, train in (
            (model_run, lambda probe: Trainer(tiny_model(seed=3)).train(
                trainer_params(model_run.id, "weights_only"), objective=supervised_objective(),
                callbacks=[probe], verbose=False, root=tmp_path)),
            (trainer_run, lambda probe: tiny_model(seed=3).train(
                model_params(trainer_run.id, "weights_only"), callbacks=[probe], verbose=False,
                root=tmp_path))):
        probe = FirstEpochWeights()
        warm = train(probe)
        assert warm.resume_status.mode == "weights_only"
        assert warm.resume_status.source_run == source.id
        assert [r.epoch for r in warm.epoch_records()] == [1]
        saved = NNCheckpoint.from_file(source.checkpoints_dir / "last.pt").state_dict
        assert probe.at_start is not None and same_weights(probe.at_start, dict(saved))
