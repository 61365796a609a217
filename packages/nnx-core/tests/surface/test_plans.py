"""nnx.plans.ExperimentPlan (spec §20): branching, pure validation, fit, attempts, metrics."""

from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from nnx import (
    Callback,
    Devices,
    EarlyStopping,
    LRMonitor,
    MetricSpec,
    MonitorSpec,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    TaskSpec,
)
from nnx._foundation.seeding import set_seed
from nnx.plans import Diagnostic, ExperimentPlan, PlanData, PlanError, SplitMetrics
from nnx.testing import sgd, tiny_batches, weights

NET = NNParams(input_dim=4, output_dim=3, hidden_dims=(8,))
MODEL = NNModelParams(device=Devices.CPU)


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a plan writes under <cwd>/runs, as NNModel.train does
    for name in ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG"):
        monkeypatch.setenv(name, os.environ[name]) if name in os.environ else \
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", torch.backends.cudnn.deterministic)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark)


def train_params(**fields) -> NNTrainParams:
    base = dict(n_epochs=2, train_loader=tiny_batches(3), val_loader=tiny_batches(2, seed=1),
                optim=sgd(), scheduler=None)
    return NNTrainParams(**{**base, **fields})


def plan(**fields) -> ExperimentPlan:
    return ExperimentPlan(model=MODEL, train=train_params(**fields), net=NET, seed=7)


def records(run) -> list[tuple]:
    return [(i.epoch, i.iter_idx, i.update_count, i.lr, i.train_edp.loss,
             None if i.val_edp is None else i.val_edp.loss) for i in run.idps]


def written() -> list[str]:
    return sorted(str(p) for p in Path("runs").rglob("*")) if Path("runs").exists() else []


def test_fit_equals_the_imperative_script() -> None:
    fitted = plan(metrics=(MetricSpec("accuracy"),)).fit(verbose=False)
    set_seed(7)
    model = NNModel(NET, MODEL)
    run = model.train(train_params(seed=7, metrics=(MetricSpec("accuracy"),)), verbose=False)
    assert fitted.run.id != run.id  # the attempt's salt, nothing else, tells them apart
    for key, value in weights(model).items():
        assert torch.equal(value, weights(fitted.model)[key]), key
    assert records(fitted.run) == records(run)
    assert [r.state() for r in fitted.run.epoch_records()] == [
        r.state() for r in run.epoch_records()]
    assert fitted.run.train_params.seed == 7 and fitted.run.train_params.parent_run_id is None


def test_every_fit_is_a_new_attempt_and_a_named_attempt_is_never_overwritten() -> None:
    p = plan(n_epochs=1)
    first, second = p.fit(verbose=False), p.fit(verbose=False)
    assert first.run.id != second.run.id and first.attempt_id != second.attempt_id
    assert first.run.path.is_dir() and second.run.path.is_dir()
    named = p.fit("a1", verbose=False)
    assert named.attempt_id == "a1"
    before = written()
    with pytest.raises(FileExistsError):
        p.fit("a1", verbose=False)
    assert written() == before


def test_branching_returns_new_plans_and_keeps_what_it_is_not_given() -> None:
    val = tiny_batches(1, seed=3)
    base = plan(metrics=(MetricSpec("accuracy"),)).with_data(identity="split-a")
    branch = base.with_epochs(5).with_data(tiny_batches(1))
    assert base.train.n_epochs == 2 and branch.train.n_epochs == 5
    assert branch.data.val is base.data.val and branch.data.identity == "split-a"
    assert branch.with_data(val=None).data.val is None
    assert base.with_data(val=val, identity=None).data == PlanData(base.data.train, val, None)
    monitored = base.with_metrics(monitor=MonitorSpec(metric="accuracy"))
    assert monitored.train.metrics == base.train.metrics and base.train.monitor is None
    assert base.with_optim(sgd(0.5)).train.optim.max_lr == 0.5 and base.train.optim.max_lr == 0.1
    assert base.with_scheduler(None).train.scheduler is None
    assert base.with_seed(3).seed == 3 and base.seed == 7
    assert base.with_net(NNParams(input_dim=4, output_dim=3)).net is not base.net
    assert base.with_data(identity="b").train is base.train  # params objects are shared


def test_collections_are_copied_so_no_caller_edit_reaches_a_plan() -> None:
    callbacks = [LRMonitor()]
    extra = {"acc": lambda y, p: float((y == p).mean())}
    p = ExperimentPlan(model=MODEL, train=train_params(), net=NET, seed=0, callbacks=callbacks)
    q = p.with_extra_metrics(extra)
    callbacks.append(LRMonitor())
    extra["more"] = extra["acc"]
    assert len(p.callbacks) == 1 and isinstance(p.callbacks, tuple)
    assert list(q.train.extra_metrics) == ["acc"]
    with pytest.raises(TypeError):
        q.train.extra_metrics["x"] = None  # type: ignore[index]
    assert p.callbacks[0] is callbacks[0]  # borrowed: the same instance


def test_the_plans_seed_overrides_the_training_params_seed() -> None:
    p = ExperimentPlan(model=MODEL, train=train_params(n_epochs=1, seed=1), net=NET)
    assert p.fit(verbose=False).run.train_params.seed == 1
    assert p.with_seed(2).fit(verbose=False).run.train_params.seed == 2


class Exploding:
    """A loader whose iteration fails: validate() must never iterate it."""

    def __iter__(self):
        raise AssertionError("validate() iterated a loader")


def test_validate_reports_every_problem_with_its_path_in_one_call() -> None:
    calls = []

    def factory():
        calls.append("called")
        return tiny_batches()

    broken = ExperimentPlan(
        model=NNModelParams(device=Devices.CPU, task=TaskSpec.categorical(4)),
        train=NNTrainParams(n_epochs=1, optim=sgd(), scheduler=None, overwrite_existing=True,
                            parent_run_id="someone", metrics=(MetricSpec("accuracy"),),
                            monitor=MonitorSpec(metric="accuracy")),
        net=NET, seed=-1,
        data=PlanData(torch.zeros(4, 4), iter(tiny_batches()), 7),
        callbacks=(EarlyStopping(monitor=MonitorSpec(metric="nll")), lambda: LRMonitor(),
                   Exploding(), 3),
        callback_factories=(factory, lambda x: x),
        components=(object(),), provenance="not a manifest", batch_adapter="positional",
    ).resuming("bad/id", epochs="planned", mode="weights_only")
    found = broken.validate()
    assert not found.ok and calls == [] and written() == []
    assert found.paths == (
        "net", "data.train", "data.val", "data.identity", "seed", "train.overwrite_existing",
        "resume.run_id", "resume", "resume.epochs", "callbacks[0]",
        "callbacks[1]", "callbacks[2]", "callbacks[3]", "callback_factories[1]",
        "components[0]", "provenance", "batch_adapter"), found.diagnostics
    messages = dict((d.path, d.message) for d in found)
    assert "4 outputs but net.output_dim is 3" in messages["net"]
    assert "single samples" in messages["data.train"]
    assert "one-shot iterator" in messages["data.val"]
    assert "reads as a factory" in messages["callbacks[1]"]
    assert "nll" in messages["callbacks[0]"]
    assert "needs a stateful resume" in messages["resume.epochs"]
    with pytest.raises(PlanError) as info:
        broken.fit("bad/attempt")
    assert [d.path for d in info.value.diagnostics] == [*found.paths, "attempt"]
    assert calls == [] and written() == []


def test_validate_checks_the_model_without_building_it() -> None:
    found = ExperimentPlan(model=MODEL, train=train_params(), net=None, seed=0).validate()
    assert found.paths == ("net",)
    not_a_task = ExperimentPlan(model=MODEL, train=train_params(), net=NET, seed=0,
                                task="categorical").validate()
    assert not_a_task.paths == ("model",) and "nnx.tasks.Task" in not_a_task.diagnostics[0].message
    unregistered = ExperimentPlan(
        model=NNModelParams(device=Devices.CPU, net=__import__("nnx").ModelSpec("acme.none", 1)),
        train=train_params(), seed=0).validate()
    assert unregistered.paths == ("model.net",)
    wrong_input = plan(metrics=(MetricSpec("mae"),)).validate()
    assert wrong_input.paths == ("train.metrics[0]",), wrong_input.diagnostics
    assert plan().validate().ok
    no_val = plan(metrics=(MetricSpec("accuracy"),), monitor=MonitorSpec(metric="accuracy"))
    assert no_val.validate().ok
    assert no_val.with_data(val=None).validate().paths == ("train.monitor",)


def test_a_borrowed_callback_is_checked_on_a_copy_and_never_bound() -> None:
    stop = EarlyStopping(monitor=MonitorSpec(metric="accuracy"))
    before = dict(vars(stop))
    p = plan(metrics=(MetricSpec("accuracy"),)).with_callbacks(stop)
    assert p.validate().ok
    assert vars(stop) == before


def test_a_planned_horizon_is_reported_on_the_field_the_caller_set() -> None:
    Path("runs/r1").mkdir(parents=True)  # a source that exists: only the horizon is wrong
    no_run = plan(resume_epochs="planned").validate()
    assert [d.path for d in no_run] == ["train.resume_epochs"]
    by_mode = plan(resume_epochs="planned").resuming("r1", mode="weights_only").validate()
    assert [d.path for d in by_mode] == ["resume.mode"]
    assert plan().resuming("r1", mode="stateful", epochs="planned").validate().ok
    assert [d.path for d in plan().resuming("r1", mode="sometimes").validate()] == [
        "resume.mode"]
    assert plan().resuming("r1").without_resume().resume is None


def test_data_and_callback_factories_run_once_per_fit_after_seeding() -> None:
    seen = []

    def loader():
        seen.append(("data", torch.rand(1).item()))
        return tiny_batches(2)

    def monitor():
        seen.append(("callback", None))
        return LRMonitor()

    p = plan(n_epochs=1).with_data(loader, val=None).with_callback_factories(monitor)
    first = p.fit(verbose=False)
    p.fit(verbose=False)
    set_seed(7)
    assert seen == [("data", torch.rand(1).item()), ("callback", None)] * 2
    assert first.metrics["val"] == SplitMetrics("val", False, 0, None, {},
                                                "the plan has no validation data")


def test_a_factory_returning_no_batches_raises_plan_error_before_a_model_is_built() -> None:
    calls = []
    p = plan().with_data(lambda: torch.zeros(8, 4)).with_callback_factories(
        lambda: calls.append(1) or LRMonitor())
    with pytest.raises(PlanError, match=r"data\.train: the factory returned a bare Tensor"):
        p.fit(verbose=False)
    assert calls == [] and written() == []
    with pytest.raises(PlanError, match=r"data\.train: the factory returned None"):
        plan().with_data(lambda: None).fit(verbose=False)
    assert plan().with_data(np.zeros((4, 4))).validate().paths == ("data.train",)
    assert plan().with_data({"x": 1}).validate().diagnostics[0].message.startswith(
        "a mapping iterates its keys")
    dataset = torch.utils.data.TensorDataset(torch.zeros(4, 4), torch.zeros(4))
    assert "map-style Dataset" in plan().with_data(val=dataset).validate().diagnostics[
        0].message
    assert written() == []
    bad_callback = plan().with_callback_factories(
        lambda: EarlyStopping(monitor=MonitorSpec(metric="nll")))
    with pytest.raises(PlanError, match=r"callback_factories\[0\]"):
        bad_callback.fit(verbose=False)
    assert written() == []


def test_split_metrics_come_from_the_final_epoch() -> None:
    extra = {"hits": lambda y, p: float((y == p).sum())}
    fitted = plan(metrics=(MetricSpec("accuracy"),)).with_extra_metrics(extra).fit(
        verbose=False)
    last = fitted.run.epoch_records()[-1]
    train, val = fitted.metrics["train"], fitted.metrics["val"]
    assert (train.split, train.available, train.epoch, train.source) == ("train", True, 1,
                                                                         "epoch")
    assert train.values["metrics/accuracy"] == last.train_summary.metrics["accuracy"]
    assert not any(k.startswith("extra/") for k in train.values)  # per batch: run.idps
    assert (val.available, val.source, val.values["loss"]) == (True, "epoch",
                                                               last.val_edp.loss)
    assert val.values["extra/hits"] == last.val_edp.extra["hits"]
    plain = plan().fit(verbose=False)
    assert plain.metrics["train"].source == "last_batch"
    assert plain.metrics["train"].values["loss"] == plain.run.idps[-1].train_edp.loss


def test_a_diverged_loss_is_kept_not_dropped() -> None:
    nan_batches = [(torch.full((4, 4), float("nan")), torch.tensor([0, 1, 2, 0]))]
    fitted = plan(n_epochs=1, val_loader=nan_batches).fit(verbose=False)
    assert np.isnan(fitted.metrics["val"].values["loss"])


def test_probe_reports_the_shape_and_the_default_steps_loss() -> None:
    x, y = tiny_batches(1)[0]
    p = plan()
    probed = p.probe((x, y))
    set_seed(7)
    model = NNModel(NET, MODEL)
    expected = model.loss_fn(model.net(x), y).item()
    assert probed.output_shape == (4, 3)
    assert probed.loss == pytest.approx(expected, abs=0)
    assert p.probe(x).loss is None and p.probe((x,)).output_shape == (4, 3)
    assert p.with_step_fns(lambda ctx: None).probe((x, y)).loss is None


def _ambient() -> tuple:
    return (random.getstate(), np.random.get_state()[1].tolist(), torch.get_rng_state(),
            torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark,
            torch.are_deterministic_algorithms_enabled(),
            os.environ.get("PYTHONHASHSEED"), os.environ.get("CUBLAS_WORKSPACE_CONFIG"))


def _same(a: tuple, b: tuple) -> bool:
    return all(torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y
               for x, y in zip(a, b, strict=True))


def test_probe_restores_the_ambient_state_on_success_and_failure(monkeypatch) -> None:
    monkeypatch.setenv("PYTHONHASHSEED", "123")
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.deterministic = False
    random.random(), np.random.rand(), torch.rand(1)
    before = _ambient()
    plan().probe(tiny_batches(1)[0])
    assert _same(_ambient(), before)
    with pytest.raises(ValueError, match="expects 4 features"):
        plan().probe((torch.zeros(2, 9), torch.zeros(2, dtype=torch.long)))  # wrong width
    assert _same(_ambient(), before)
    assert not torch.cuda.is_available() or not torch.cuda.is_initialized()


def test_probe_refuses_a_plan_without_a_model_or_seed() -> None:
    p = ExperimentPlan(model=MODEL, train=train_params(), net=None)
    with pytest.raises(PlanError) as info:
        p.probe(tiny_batches(1)[0])
    assert [d.path for d in info.value.diagnostics] == ["net", "seed"]


def test_legacy_callables_and_diagnostic_text() -> None:
    seen = []
    fitted = plan(n_epochs=1).with_callbacks(lambda idps: seen.append(len(idps))).fit(
        verbose=False)
    assert seen and fitted.run is not None
    assert str(Diagnostic("seed", "missing")) == "seed: missing"


RANK_SCRIPT = """
import os, sys, torch, torch.distributed as dist
rank, port = int(sys.argv[1]), sys.argv[2]
dist.init_process_group("gloo", rank=rank, world_size=2, init_method=f"tcp://127.0.0.1:{port}")
os.chdir(sys.argv[3])
from nnx import Devices, NNModelParams, NNParams, NNTrainParams
from nnx.plans import ExperimentPlan
from nnx.testing import sgd, tiny_batches
calls = []
plan = ExperimentPlan(model=NNModelParams(device=Devices.CPU), seed=0,
                      train=NNTrainParams(n_epochs=1, optim=sgd(), scheduler=None),
                      net=NNParams(input_dim=4, output_dim=3),
                      ).with_data(lambda: calls.append(1) or tiny_batches())
before = torch.get_rng_state()
try:
    plan.fit(verbose=False)
except RuntimeError as exc:
    assert "2 ranks" in str(exc) and "distributed=DDP()" in str(exc), exc
else:
    raise AssertionError("a 2-rank group was not refused")
assert calls == [] and torch.equal(before, torch.get_rng_state())
dist.barrier()
dist.destroy_process_group()
print("refused")
"""


@pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed")
def test_fit_refuses_a_multi_rank_group_before_seeding_or_writing(tmp_path: Path) -> None:
    import socket
    import subprocess
    import sys

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = str(s.getsockname()[1])
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", RANK_SCRIPT, str(rank), port,
                               str(tmp_path)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert all(out.strip() == "refused" for out, _ in outputs)
    assert not (tmp_path / "runs").exists()


@pytest.mark.skipif(not torch.distributed.is_available(), reason="no torch.distributed")
def test_a_one_rank_group_behaves_as_no_group(tmp_path: Path) -> None:
    torch.distributed.init_process_group(
        "gloo", rank=0, world_size=1, init_method=f"file://{tmp_path / 'rendezvous'}")
    try:
        fitted = plan(n_epochs=1).fit(verbose=False)
    finally:
        torch.distributed.destroy_process_group()
    assert fitted.run.path.is_dir()


class Counter(Callback):
    def __init__(self) -> None:
        self.epochs = 0

    def on_epoch_end(self, ctx) -> None:
        self.epochs += 1


def test_borrowed_objects_are_shared_by_every_fit_and_factories_give_fresh_ones() -> None:
    borrowed = Counter()
    made: list[Counter] = []
    p = plan(n_epochs=1).with_callbacks(borrowed).with_callback_factories(
        lambda: made.append(Counter()) or made[-1])
    p.fit(verbose=False)
    p.fit(verbose=False)
    assert borrowed.epochs == 2 and [c.epochs for c in made] == [1, 1]


def test_probe_touches_no_factory_callback_or_loader_and_writes_nothing() -> None:
    calls = []
    p = (plan().with_data(lambda: calls.append("data") or tiny_batches(), val=Exploding())
         .with_callback_factories(lambda: calls.append("cb") or LRMonitor())
         .with_callbacks(Counter()))
    x, y = tiny_batches(1)[0]
    p.probe((x, y))
    assert calls == [] and p.callbacks[0].epochs == 0 and written() == []
    masked = p.probe((x, torch.full_like(y, -100)))  # every target at ignore_index
    assert masked.loss is None and masked.output_shape == (4, 3)


class _KeepsScores:
    """A metric that stores every prediction (no merge()): unbounded."""

    def __init__(self, config) -> None:
        self.seen: list = []

    def update(self, target, prediction) -> None:
        self.seen.append(prediction)

    def result(self) -> float:
        return float(len(self.seen))


def test_validate_reports_what_streaming_eval_step_refuses_at_the_spec_paths() -> None:
    """§21: validate() names train.extra_metrics and train.metrics[i] for the streaming
    step, itself or a partial of it, and writes nothing; the default validation is fine."""
    import functools

    from nnx.metrics import register_metric, unregister_metric
    from nnx.streaming import streaming_eval_step

    register_metric("plans.keeps", 1, _KeepsScores, input="labels", mode="max")
    try:
        train = train_params(extra_metrics={"n": lambda t, p: len(t)},
                             metrics=(MetricSpec("accuracy"), MetricSpec("plans.keeps")))
        plan = ExperimentPlan(model=MODEL, train=train, net=NET, seed=0)
        assert plan.validate().ok
        for step in (streaming_eval_step, functools.partial(streaming_eval_step)):
            found = plan.with_step_fns(eval=step).validate()
            assert found.paths == ("train.extra_metrics", "train.metrics[1]"), found
        assert written() == []
    finally:
        unregister_metric("plans.keeps", 1)


def test_every_with_method_returns_a_new_plan_and_leaves_the_source_unchanged() -> None:
    """§20 Branching: each with_* (and resuming / without_resume) returns a new plan with the
    one change; the source plan is the same object, field for field, afterwards."""
    base = plan()
    before = dict(vars(base))
    step, objective = (lambda ctx: None), (lambda ctx: None)
    branches = {
        "net": base.with_net(NNParams(input_dim=4, output_dim=3)),
        "model": base.with_model(NNModelParams(device=Devices.CPU, task=TaskSpec.categorical(3))),
        "train": base.with_train(train_params(n_epochs=9)),
        "callbacks": base.with_callbacks(LRMonitor()),
        "callback_factories": base.with_callback_factories(LRMonitor),
        "train_step_fn": base.with_step_fns(step),
        "eval_step_fn": base.with_step_fns(eval=step),
        "objective": base.with_objective(objective),
        "components": base.with_components(Counter()),
        "provenance": base.with_provenance({"source": "x"}),
        "batch_adapter": base.with_batch_adapter("adapter"),
        "resume": base.resuming("r1", "best", "stateful", "planned"),
        "seed": base.with_seed(1),
        "data": base.with_data(tiny_batches(1)),
    }
    for field, branch in branches.items():
        assert branch is not base and isinstance(branch, ExperimentPlan)
        changed = {k for k, v in vars(branch).items() if v is not before[k]}
        assert changed == {field}, (field, changed)
    assert branches["resume"].resume.checkpoint == "best"
    assert branches["resume"].without_resume().resume is None
    assert branches["eval_step_fn"].train_step_fn is None  # with_step_fns keeps the other
    for name, branch in (("with_epochs", base.with_epochs(4)),
                         ("with_optim", base.with_optim(sgd(0.2))),
                         ("with_scheduler", base.with_scheduler(None)),
                         ("with_metrics", base.with_metrics((MetricSpec("accuracy"),))),
                         ("with_extra_metrics", base.with_extra_metrics({"n": len}))):
        changed = {k for k, v in vars(branch).items() if v is not before[k]}
        assert changed == {"train"}, (name, changed)
    assert {k: v for k, v in vars(base).items()} == before
    assert all(vars(base)[k] is v for k, v in before.items())


def test_the_attempt_id_is_folded_into_the_salt_as_plan_attempt_id(tmp_path: Path) -> None:
    """§20 Attempts: fit(attempt="a1") is model.train(..., salt="plan-attempt:a1")."""
    fitted = plan(n_epochs=1).fit("a1", verbose=False)
    set_seed(7)
    model = NNModel(NET, MODEL)
    script = model.train(train_params(n_epochs=1, seed=7), salt="plan-attempt:a1",
                         root=tmp_path / "elsewhere", verbose=False)
    assert script.id == fitted.run.id
    other = NNModel(NET, MODEL).train(train_params(n_epochs=1, seed=7), salt="a1",
                                      root=tmp_path / "other", verbose=False)
    assert other.id != fitted.run.id  # the prefix is part of the salt


def test_the_probe_loss_is_the_train_mode_pass_and_the_shape_the_eval_mode_one() -> None:
    """§20 Probe: the loss runs in train mode (dropout on) with no gradient; with dropout
    the eval-mode loss differs, so the check can fail."""
    net = NNParams(input_dim=4, output_dim=3, hidden_dims=(64,), dropout_prob=0.5)
    p = ExperimentPlan(model=MODEL, train=train_params(), net=net, seed=7)
    x, y = tiny_batches(1)[0]
    probed = p.probe((x, y))
    set_seed(7)
    model = NNModel(net, MODEL)
    with torch.no_grad():
        model.net.eval()
        eval_loss = model.loss_fn(model.net(x), y).item()
        model.net.train()
        train_loss = model.loss_fn(model.net(x), y).item()
    assert probed.loss == train_loss and eval_loss != train_loss
    assert probed.output_shape == (4, 3)


def test_split_metric_keys_are_the_names_the_logger_callbacks_log() -> None:
    """§20 Metrics: values keys are the logged names (loss, error, the classification
    fields, metrics/<name>, extra/<name>) without the split prefix."""
    from nnx.callbacks._scalars import edp_scalars

    extra = {"hits": lambda y, p: float((y == p).sum())}
    fitted = plan(n_epochs=1, metrics=(MetricSpec("accuracy"),)).with_extra_metrics(
        extra).fit(verbose=False)
    last = fitted.run.epoch_records()[-1]
    for split, edp in (("val", last.val_edp), ("train", last.train_summary)):
        logged = {k.split("/", 1)[1]: v for k, v in edp_scalars(split, edp).items()}
        assert dict(fitted.metrics[split].values) == logged, split
    assert {"loss", "error", "accuracy", "metrics/accuracy", "extra/hits"} <= set(
        fitted.metrics["val"].values)


class Named(Callback):
    def __init__(self, name: str, log: list[str]) -> None:
        self.name, self.log = name, log

    def on_epoch_end(self, ctx) -> None:
        self.log.append(self.name)


def test_callbacks_run_in_the_scripts_order_borrowed_then_factory_made() -> None:
    """§20 Fit: the fit matches the script on callback order: the borrowed callbacks in
    order, then each factory's, as model.train(callbacks=[*borrowed, *made])."""
    log: list[str] = []
    p = plan(n_epochs=2).with_callbacks(Named("b1", log), Named("b2", log)) \
        .with_callback_factories(lambda: Named("f1", log), lambda: Named("f2", log))
    p.fit(verbose=False)
    assert log == ["b1", "b2", "f1", "f2"] * 2


def test_validate_names_the_update_owner_and_the_params_objects() -> None:
    """§20 Validate paths: objective (a step and an objective both own the update), model and
    train (not the params classes), each reported without building anything."""
    step, objective = (lambda ctx: None), (lambda ctx: None)
    both = plan().with_step_fns(step).with_objective(objective).validate()
    assert both.paths == ("objective",), both.diagnostics
    assert plan().with_objective(objective).validate().ok
    wrong = ExperimentPlan(model="cpu", train=train_params(), net=NET, seed=0)  # type: ignore
    assert wrong.validate().paths == ("model",)
    bad_train = ExperimentPlan(model=MODEL, train={"n_epochs": 1}, net=NET, seed=0,  # type: ignore
                               data=PlanData(tiny_batches()))
    assert bad_train.validate().paths == ("train",)
    assert written() == []


def test_a_validation_monitor_without_validation_data_is_refused_borrowed_or_made() -> None:
    """§6.4 / §20: validate() checks a borrowed EarlyStopping's MonitorSpec as train would;
    a factory-made one raises PlanError when the fit starts, before anything is written."""
    val_monitor = EarlyStopping(monitor=MonitorSpec(split="val"))
    train_only = plan().with_data(val=None)
    borrowed = train_only.with_callbacks(val_monitor).validate()
    assert borrowed.paths == ("callbacks[0]",)
    assert "validation split" in borrowed.diagnostics[0].message
    with pytest.raises(PlanError) as info:
        train_only.with_callbacks(val_monitor).fit(verbose=False)
    assert [d.path for d in info.value.diagnostics] == ["callbacks[0]"]
    made = train_only.with_callback_factories(
        lambda: EarlyStopping(monitor=MonitorSpec(split="val")))
    assert made.validate().ok  # no factory is called while validating
    with pytest.raises(PlanError) as info:
        made.fit(verbose=False)
    assert [d.path for d in info.value.diagnostics] == ["callback_factories[0]"]
    assert written() == []
    # Validation data, given or from a factory never called here, satisfies it.
    assert plan().with_callbacks(val_monitor).validate().ok
    assert plan().with_data(val=lambda: tiny_batches(2, seed=1)).with_callbacks(
        val_monitor).validate().ok


def test_validate_refuses_a_resume_from_a_run_that_does_not_exist() -> None:
    """Issue 36 item 22: as the fit would, and the refused fit leaves nothing behind
    (no lease file of the run that never was)."""
    missing = plan().resuming("nosuchrun")
    found = missing.validate()
    assert found.paths == ("resume.run_id",)
    assert "no run nosuchrun" in found.diagnostics[0].message
    assert plan().resuming("best").validate().paths == ("resume.run_id",)  # no runs/best
    with pytest.raises(PlanError):
        missing.fit(verbose=False)
    assert written() == []
    source = plan(n_epochs=1).fit(verbose=False)
    assert plan().resuming(source.run.id).validate().ok
