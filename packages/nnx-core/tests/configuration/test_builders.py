"""Variant-gated builders, branching and from_params (spec §2.4, §2.5, §8)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest
from hypothesis import given

from nnx import (
    NNOptimParams,
    NNOptimParamsBuilder,
    NNParamGroupSpec,
    NNSchedulerParams,
    NNSchedulerParamsBuilder,
    NNTrainerParams,
    NNTrainerParamsBuilder,
    NNTrainParams,
    Optims,
    Schedulers,
)

# The strategies live beside the round-trip tests; load that module by path.
_spec = importlib.util.spec_from_file_location(
    "_nnx_rt", pathlib.Path(__file__).with_name("test_params_round_trip.py"))
assert _spec and _spec.loader
rt = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rt)


# -- scheduler builder ------------------------------------------------------------

def test_scheduler_variants_set_kind_and_knobs():
    b = NNSchedulerParams.builder
    assert b().reduce_on_plateau(factor=0.5, patience=2).build() == NNSchedulerParams(
        factor=0.5, patience=2)
    assert b().reduce_on_plateau().build().kind is None  # legacy ids unchanged
    assert b().step(step_size=3, factor=0.5).build() == NNSchedulerParams(
        kind=Schedulers.STEP, step_size=3, factor=0.5)
    assert b().cosine_annealing(T_max=7, min_lr=1e-5).build() == NNSchedulerParams(
        kind=Schedulers.COSINE_ANNEALING, T_max=7, min_lr=1e-5)
    assert b().linear_warmup_decay(warmup_steps=3, total_steps=8).build() == NNSchedulerParams(
        kind=Schedulers.LINEAR_WARMUP_DECAY, warmup_steps=3, total_steps=8)


def test_one_cycle_example_from_the_spec():
    scheduler = NNSchedulerParams.builder().one_cycle(
        max_lr=1e-3, total_steps=10_000,
        min_lr=1e-7, factor=0.5, patience=10, cooldown=2, threshold=1e-3,
    ).build()
    assert scheduler.state() == {
        "kind": "ONE_CYCLE", "min_lr": 1e-7, "factor": 0.5, "patience": 10, "cooldown": 2,
        "threshold": 1e-3, "total_steps": 10_000, "max_lr": 1e-3,
    }
    assert NNSchedulerParams.from_state(scheduler.state()) == scheduler


def test_scheduler_last_variant_wins_and_resets_other_knobs_but_keeps_the_clock():
    b = NNSchedulerParams.builder().clock("optimizer_update").step(step_size=4, factor=0.5)
    p = b.cosine_annealing(T_max=10).build()
    assert p.kind is Schedulers.COSINE_ANNEALING and p.step_size is None and p.factor == 0.1
    assert p.clock == "optimizer_update"
    after = NNSchedulerParams.builder().one_cycle(total_steps=9).clock("optimizer_update").build()
    assert after.clock == "optimizer_update"
    loaded = NNSchedulerParamsBuilder.from_params(after).one_cycle(total_steps=12).build()
    assert loaded.clock == "optimizer_update" and loaded.total_steps == 12


def test_scheduler_builder_refusals():
    with pytest.raises(TypeError, match="unexpected scheduler knob"):
        NNSchedulerParams.builder().step(step_size=2, gamma=0.5)
    with pytest.raises(ValueError, match=r"plateau scheduler .* 'optimizer_update' clock"):
        NNSchedulerParams.builder().clock("optimizer_update").reduce_on_plateau().build()
    with pytest.raises(ValueError, match=r"step_size must be an integer >= 1"):
        NNSchedulerParams.builder().step(step_size=0).build()


# -- optimizer builder ----------------------------------------------------------

def test_adam_with_pytorch_spelling():
    opt = NNOptimParams.builder().adam(max_lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0).build()
    assert opt == NNOptimParams(name=Optims.ADAM, max_lr=1e-3, momentum=(0.9, 0.999))
    # betas land on the historical momentum field; eps at torch's default is omitted.
    assert opt.state() == {"name": "ADAM", "max_lr": 1e-3, "momentum": [0.9, 0.999],
                           "weight_decay": 0.0}
    explicit = NNOptimParams.builder().adam(max_lr=1e-3, eps=1e-8).build()
    assert "eps" not in explicit.state()
    assert NNOptimParams.builder().adam(max_lr=1e-3, eps=1e-6).build().state()["eps"] == 1e-6


def test_sgd_with_clip_and_accumulation():
    opt = (NNOptimParams.builder().sgd(max_lr=1e-2, momentum=0.9, weight_decay=5e-5)
           .grad_clip(1.0).accumulate_grad(4).build())
    assert opt == NNOptimParams(name=Optims.SGD, max_lr=1e-2, momentum=0.9, weight_decay=5e-5,
                                grad_clip_norm=1.0, accumulate_grad_batches=4)


def test_adamw_defaults_weight_decay_to_torch():
    assert NNOptimParams.builder().adamw(max_lr=1e-3).build().weight_decay == 1e-2
    assert NNOptimParams.builder().adam(max_lr=1e-3).build().weight_decay == 0.0


def test_each_variant_names_its_optimizer():
    b = NNOptimParams.builder()
    assert b.adam_amsgrad(max_lr=1e-3).build().name is Optims.ADAM_AMSGRAD
    assert b.sgd_nesterov(max_lr=1e-3, momentum=0.9).build().name is Optims.SGD_NESTEROV
    assert b.sgd(max_lr=1e-3).build().name is Optims.SGD


def test_sgd_refuses_a_non_default_eps():
    with pytest.raises(ValueError, match=r"Optims\.SGD has no eps"):
        NNOptimParams.builder().sgd(max_lr=0.1, eps=1e-6)
    with pytest.raises(ValueError, match=r"Optims\.SGD_NESTEROV has no eps"):
        NNOptimParams.builder().sgd_nesterov(max_lr=0.1, momentum=0.9, eps=1e-3)
    assert NNOptimParams.builder().sgd(max_lr=0.1, eps=1e-8).build().eps is None


def test_modifiers_survive_a_variant_change_and_last_variant_wins():
    groups = [NNParamGroupSpec(name_pattern="*.bias", weight_decay=0.0)]
    b = NNOptimParams.builder().grad_clip(0.5).param_groups(groups).adam(max_lr=1.0,
                                                                         betas=(0.5, 0.9))
    p = b.sgd(max_lr=0.1).build()
    assert p.name is Optims.SGD and p.momentum is None  # no betas leak into SGD
    assert p.grad_clip_norm == 0.5 and p.param_groups == tuple(groups)
    groups.append(NNParamGroupSpec(name_pattern="*"))  # the builder copied the list
    assert len(b.build().param_groups or ()) == 1


def test_partial_builder_needs_a_variant():
    with pytest.raises(ValueError, match="choose a variant first"):
        NNOptimParams.builder().grad_clip(1.0).build()


def test_branching_from_the_spec():
    base = NNOptimParams.builder().grad_clip(1.0)  # partial: no variant yet
    adamw = base.copy().adamw(max_lr=1e-3).build()
    sgd = base.copy().sgd(max_lr=0.05).build()
    assert adamw.name is Optims.ADAMW and adamw.grad_clip_norm == 1.0
    assert sgd.name is Optims.SGD and sgd.grad_clip_norm == 1.0
    with pytest.raises(ValueError, match="choose a variant first"):
        base.build()  # base itself is unchanged
    base.grad_clip(9.0)
    assert adamw.grad_clip_norm == 1.0  # never touches a value already built


def test_copy_branches_param_groups_one_level_deep():
    spec = NNParamGroupSpec(name_pattern="a.*")
    base = NNOptimParams.builder().adam(max_lr=1e-3).param_groups([spec])
    twin = base.copy()
    twin._param_groups.append(NNParamGroupSpec(name_pattern="b.*"))  # type: ignore[union-attr]
    assert base.build().param_groups == (spec,)
    assert twin.build().param_groups is not None and twin.build().param_groups[0] is spec


@given(rt.optim_params())
def test_optim_from_params_build_is_identity(p):
    built = NNOptimParamsBuilder.from_params(p).build()
    assert built == p and built.state() == p.state() and list(built.state()) == list(p.state())


@given(rt.scheduler_params())
def test_scheduler_from_params_build_is_identity(p):
    built = NNSchedulerParamsBuilder.from_params(p).build()
    assert built == p and list(built.state()) == list(p.state())


@given(rt.trainer_params())
def test_trainer_from_params_build_is_identity(p):
    built = NNTrainerParamsBuilder.from_params(p).build()
    assert built == p and list(built.state()) == list(p.state())


def test_from_params_accepts_exactly_its_own_class():
    class Sub(NNOptimParams):
        __slots__ = ()

    for builder, foreign in (
        (NNOptimParamsBuilder, NNSchedulerParams()),
        (NNOptimParamsBuilder, Sub()),
        (NNSchedulerParamsBuilder, NNOptimParams()),
        (NNTrainerParamsBuilder, NNTrainParams()),
    ):
        with pytest.raises(TypeError, match=type(foreign).__name__):
            builder.from_params(foreign)  # type: ignore[arg-type]


# -- trainer builder --------------------------------------------------------------

def gan():
    g = (NNOptimParams.builder().adam(max_lr=2e-4, betas=(0.5, 0.999), weight_decay=0.0)
         .param_groups([NNParamGroupSpec(name_pattern="G.*")]).build())
    d = (NNOptimParams.builder().adam(max_lr=2e-4, betas=(0.5, 0.999), weight_decay=0.0)
         .param_groups([NNParamGroupSpec(name_pattern="D.*")]).build())
    plateau = NNSchedulerParams.builder().reduce_on_plateau(
        min_lr=1e-7, factor=0.5, patience=2, cooldown=1, threshold=1e-3).build()
    return g, d, plateau


def test_gan_recipe_builds():
    g, d, plateau = gan()
    loader = [(0, 0)]
    p = (NNTrainerParams.builder().n_epochs(50).train_loader(loader)
         .optimizer("G", g).optimizer("D", d).scheduler("G", plateau).scheduler("D", plateau)
         .build())
    assert p.n_epochs == 50 and p.train_loader is loader
    assert list(p.optims) == ["G", "D"] and p.optims["G"] is g  # shared by identity
    assert set(p.schedulers) == {"G", "D"}


def test_scheduler_without_optimizer_fails_at_build_naming_the_typo():
    g, _, plateau = gan()
    b = NNTrainerParams.builder().optimizer("G", g).scheduler("D", plateau)
    with pytest.raises(ValueError, match=r"scheduler 'D' names no optimizer; the optimizer is "
                                         r"'G'\. Key each scheduler by its optimizer's name"):
        b.build()


def test_trainer_builder_snapshots_and_branches():
    g, d, plateau = gan()
    loader = [(1, 1)]
    trainer = NNTrainerParams.builder().n_epochs(3).train_loader(loader).optimizer("head", g)
    plain = trainer.copy().data_id("split-a").build()
    scheduled = trainer.copy().data_id("split-b").scheduler("head", plateau).build()
    assert plain.data_id == "split-a" and not plain.schedulers
    assert scheduled.data_id == "split-b" and scheduled.schedulers["head"] is plateau
    assert plain.state() != scheduled.state()
    assert plain.train_loader is loader and scheduled.train_loader is loader
    before = plain.state()
    trainer.optimizer("head", d).optimizer("extra", d).n_epochs(9)  # reuse the builder
    assert plain.state() == before and list(plain.optims) == ["head"]
    with pytest.raises(ValueError, match="scheduler 'typo' names no optimizer"):
        trainer.copy().scheduler("typo", plateau).build()  # per-branch validation


def test_trainer_builder_last_call_wins_and_resume_is_lineage():
    g, d, _ = gan()
    p = (NNTrainerParams.builder().optimizer("G", g).optimizer("G", d)
         .resume_from("abc", checkpoint="last", mode="auto").auto_step_schedulers(False).build())
    assert p.optims["G"] is d
    state = p.state()
    assert state["parent_run_id"] == "abc" and state["parent_checkpoint"] == "last"
    assert state["auto_step_schedulers"] is False
    again = NNTrainerParamsBuilder.from_params(p).build()
    assert again.resume_from_run_id == "abc" and again == p
    rebuilt = NNTrainerParams.from_state(state)
    assert rebuilt.resume_from_run_id is None and rebuilt.parent_run_id == "abc"


def test_trainer_extra_metrics_are_copied():
    metrics = {"acc": lambda y, p: 1.0}
    b = NNTrainerParams.builder().optimizer("G", NNOptimParams()).extra_metrics(metrics)
    p = b.build()
    metrics["other"] = lambda y, p: 0.0
    assert list(p.extra_metrics) == ["acc"]
    with pytest.raises(TypeError):
        p.extra_metrics["x"] = len  # type: ignore[index]
    assert "extra_metrics" not in p.state()


def test_trainer_builder_declares_metrics_and_a_monitor_like_the_params():
    # §6.4: NNTrainerParams.builder().metrics(...).monitor(...).
    from nnx import MetricSpec, MonitorSpec

    declared = [MetricSpec("accuracy", name="acc")]
    monitor = MonitorSpec(metric="acc", min_delta=0.01)
    base = NNTrainerParams.builder().optimizer("G", NNOptimParams())
    built = base.copy().monitor(monitor).metrics(declared).build()  # either order
    direct = NNTrainerParams(optims={"G": NNOptimParams()}, metrics=declared, monitor=monitor)
    assert built == direct and built.state() == direct.state()
    assert built.state()["metrics"] == [{"id": "accuracy", "version": 1, "name": "acc"}]
    declared.append(MetricSpec("nll"))  # the builder snapshotted the list
    branch = base.copy().metrics(declared[:1]).monitor(monitor)
    assert branch.copy().build() == built
    assert NNTrainerParamsBuilder.from_params(built).build() == built
    assert base.build().state() == NNTrainerParams(optims={"G": NNOptimParams()}).state()
    # The same refusals as the params class, at build():
    with pytest.raises(ValueError, match=r"NNTrainerParams\.metrics\[0\] must be a MetricSpec"):
        base.copy().metrics(["acc"]).build()  # type: ignore[list-item]
    with pytest.raises(ValueError, match="'acc'"):
        base.copy().monitor(monitor).build()  # monitors an undeclared metric
    with pytest.raises(ValueError, match=r"NNTrainerParams\.monitor must be a MonitorSpec"):
        base.copy().monitor("acc").build()  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="twice"):
        base.copy().metrics([MetricSpec("nll"), MetricSpec("nll")]).build()
