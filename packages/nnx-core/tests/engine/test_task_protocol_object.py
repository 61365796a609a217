"""A task is one object (issue 25): ``NNModel(..., task=task)`` takes anything implementing
``nnx.tasks.Task``; the engine uses it only through the protocol's members, and builds the
per-batch machinery beside it from the model's loss."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import torch

import nnx
from nnx import (
    ComponentSpec,
    Devices,
    Losses,
    LossTerm,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNParams,
    NNRun,
    ObjectiveResult,
    TaskSpec,
)
from nnx.components import Component
from nnx.tasks import CategoricalAdapter, Task, TaskRuntime
from nnx.testing import tiny_batches, tiny_loader, tiny_train_params, weights

DOC = Path(__file__).resolve().parents[4] / "docs" / "extending.md"
NET = NNParams(input_dim=4, output_dim=3, hidden_dims=(8,))


class Refused(ValueError):
    """What the scratch task raises to refuse a default path."""


class ScratchTask:
    """Written from scratch: the five protocol members and nothing from nnx."""

    def __init__(self, *, objective: Any = None, eval_step: Any = None,
                 refuse: tuple[str, ...] = ("predict",)) -> None:
        self._objective, self._eval_step, self.refuse = objective, eval_step, refuse
        self.asked: list[str] = []
        self.raised: list[Exception] = []

    def objective(self) -> Any:
        return self._objective

    def eval_step(self) -> Any:
        return self._eval_step

    def metric_specs(self) -> tuple[Any, ...]:
        return ()

    def sample_ids(self, data: Any, rows: int) -> Any:
        return None

    def refuse_default(self, path: str) -> None:
        self.asked.append(path)
        if path in self.refuse:
            error = Refused(f"ScratchTask refuses the default {path} path")
            self.raised.append(error)
            raise error


class ConfiguredTask(ScratchTask):
    """ScratchTask plus identity(): its configuration changes what trains."""

    def __init__(self, smoothing: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.smoothing = smoothing

    def identity(self) -> dict[str, Any]:
        return {"kind": "test.scratch", "smoothing": self.smoothing}


def model(task_object: Any = None, seed: int = 0, **params: Any) -> NNModel:
    """A seeded CPU classifier; ``params`` are NNModelParams fields (its TaskSpec too)."""
    torch.manual_seed(seed)
    return NNModel(net_params=NET, params=NNModelParams(device=Devices.CPU, **params),
                   task=task_object)


# -- the Must-show ------------------------------------------------------------------------


def test_a_scratch_task_trains_its_identity_moves_the_id_and_its_refusal_is_predicts(tmp_path):
    task = ConfiguredTask(0.1)
    assert isinstance(task, Task) and not isinstance(task, CategoricalAdapter)
    assert not any(c.__module__.startswith("nnx") for c in type(task).__mro__[:-1])
    lm = model(task)
    assert lm.task is task
    before = weights(lm)
    run = lm.train(tiny_train_params(), root=tmp_path, verbose=False)
    assert any(not torch.equal(before[k], v) for k, v in weights(lm).items())  # it trained
    assert "train" in task.asked  # objective() None: the default step asked first
    bare = model().train(tiny_train_params(), root=tmp_path / "bare", verbose=False)
    assert run.id != bare.id
    assert run.state()["task"] == {"kind": "test.scratch", "smoothing": 0.1}
    assert NNRun.load(run.id, root=tmp_path).task == run.state()["task"]  # run.yaml keeps it
    other = model(ConfiguredTask(0.2)).train(tiny_train_params(), root=tmp_path, verbose=False)
    assert other.id not in (run.id, bare.id)
    with pytest.raises(Refused) as info:
        lm.predict(torch.zeros(2, 4))
    assert info.value is task.raised[-1]  # exactly what refuse_default("predict") raised


def test_a_task_without_identity_keeps_the_bare_model_s_id_and_records(tmp_path):
    bare = model().train(tiny_train_params(), root=tmp_path / "a", verbose=False)
    tasked = model(ScratchTask()).train(tiny_train_params(), root=tmp_path / "b",
                                        verbose=False)
    assert tasked.id == bare.id and "task" not in tasked.state()
    # The per-batch machinery is the loss's default: records field for field the bare ones.
    assert [i.state() for i in tasked.idps] == [i.state() for i in bare.idps]


def test_the_per_batch_machinery_is_the_loss_default_around_the_task():
    lm = model(ScratchTask(refuse=()), loss=Losses.MEAN_SQUARED_ERROR)
    runtime = lm.task_runtime  # the task object beside the loss's own machinery
    assert isinstance(runtime, TaskRuntime) and runtime.task is lm.task
    assert not runtime.own_machinery and runtime.batch_ops is lm.task_adapter
    assert type(lm.task_adapter).__name__ == "LossOnlyAdapter"
    loader = [(x, torch.randn(len(x), 3)) for x, _ in tiny_batches()]
    assert lm.evaluate(loader).loss == model(loss=Losses.MEAN_SQUARED_ERROR).evaluate(loader).loss
    lm.loss_fn = torch.nn.L1Loss()  # another loss: the view is rebuilt, the task kept
    assert lm.task_runtime.task is lm.task and lm.task_adapter.loss_fn is lm.loss_fn


# -- declared once ------------------------------------------------------------------------


def test_a_taskspec_and_a_task_object_together_are_refused():
    with pytest.raises(ValueError, match="declare it once"):
        model(ScratchTask(), task=TaskSpec.categorical(3))
    spec_model = model(task=TaskSpec.categorical(3))
    with pytest.raises(ValueError, match="declare it once"):
        spec_model.task = ScratchTask()
    assert spec_model.task is None and spec_model.task_adapter.task == TaskSpec.categorical(3)


def test_what_is_not_a_task_object_is_refused_naming_what_it_lacks():
    with pytest.raises(TypeError, match=r"NNModelParams\(task=\.\.\.\)"):
        model(TaskSpec.categorical(3))
    with pytest.raises(TypeError, match="lacks objective, eval_step"):
        model(object())


def test_setting_the_task_later_resolves_it_and_none_restores_the_default(tmp_path):
    lm = model()
    lm.task = ConfiguredTask(0.3)
    assert lm.task_runtime.task is lm.task and not lm.task_runtime.own_machinery
    assert lm.train(tiny_train_params(), root=tmp_path, verbose=False).state()["task"][
        "smoothing"] == 0.3
    lm.task = None
    assert isinstance(lm.task_adapter, CategoricalAdapter)
    assert lm.task_runtime.task is lm.task_adapter  # the adapter answers the protocol


# -- the protocol's members are what the engine uses ---------------------------------------


def test_the_task_objective_and_eval_step_are_used(tmp_path):
    calls: list[int] = []

    def squared(ctx: Any) -> ObjectiveResult:
        inputs, y = ctx.split()
        out = ctx.full_precision(ctx.forward(inputs))
        calls.append(len(y))
        total = (out - torch.nn.functional.one_hot(y, 3).float()).square().sum()
        return ObjectiveResult((LossTerm("squared", total, float(y.numel())),))

    def evaluation(ctx: Any) -> NNEvaluationDataPoint:
        return NNEvaluationDataPoint(loss=1.5, metrics={"from_task": float(ctx.epoch_idx)})

    task = ScratchTask(objective=squared, eval_step=evaluation, refuse=("train", "evaluate"))
    run = model(task).train(tiny_train_params(val_loader=tiny_loader(), n_epochs=2),
                            root=tmp_path, verbose=False)
    assert calls == [4, 4, 4, 4]  # 2 epochs × 2 batches, through the task's objective
    assert [r.val_edp.metrics for r in run.epoch_records()] == [{"from_task": 0.0},
                                                                {"from_task": 1.0}]
    assert task.asked == []  # it owned both paths: no default was about to run


def test_a_refused_default_training_path_stops_train_before_anything(tmp_path):
    lm = model(ScratchTask(refuse=("train",)))
    before = weights(lm)
    with pytest.raises(Refused, match="default train path"):
        lm.train(tiny_train_params(), root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(before[k], v) for k, v in weights(lm).items())


def test_check_train_refuses_before_anything_is_written(tmp_path):
    class Checking(ScratchTask):
        def check_train(self, params: Any) -> None:
            raise ValueError(f"{len(params.train_loader)} batches: not today")

    lm = model(Checking())
    with pytest.raises(ValueError, match="2 batches: not today"):
        lm.train(tiny_train_params(), root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()


# -- a component task ----------------------------------------------------------------------


class CountingTask(ScratchTask):
    """A component: the rows its objective saw, checkpointed and restored."""

    def __init__(self) -> None:
        super().__init__(objective=self._step, refuse=())
        self.rows, self.loaded = 0, None

    def _step(self, ctx: Any) -> ObjectiveResult:
        inputs, y = ctx.split()
        self.rows += len(y)
        out = ctx.full_precision(ctx.forward(inputs))
        return ObjectiveResult((LossTerm("ce", torch.nn.functional.cross_entropy(
            out, y, reduction="sum"), float(len(y))),))

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("test.counting_task", version=1)

    def component_state(self) -> dict[str, int]:
        return {"rows": self.rows}

    def load_component_state(self, state: dict[str, int], *, version: int) -> None:
        self.loaded = dict(state)
        self.rows = state["rows"]


def test_a_component_task_is_checkpointed_and_resumed(tmp_path):
    first = CountingTask()
    assert isinstance(first, Component)
    run = model(first).train(tiny_train_params(n_epochs=2), root=tmp_path, verbose=False)
    assert first.rows == 16
    resumed = CountingTask()
    again = model(resumed, seed=5).train(
        tiny_train_params(n_epochs=1, resume_from_run_id=run.id), root=tmp_path,
        verbose=False)
    assert resumed.loaded == {"rows": 16}  # restored from the run's last checkpoint
    assert resumed.rows == 24 and again.id != run.id
    reloaded = NNModel.from_checkpoint(NNCheckpoint.load(again.id, "last", root=tmp_path),
                                       task=CountingTask())
    assert isinstance(reloaded.task, CountingTask)
    assert reloaded.task_runtime.task is reloaded.task


# -- the documented example ---------------------------------------------------------------


def test_the_scratch_task_of_extending_md_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the block trains into ./runs
    page = DOC.read_text(encoding="utf-8")
    section = page[page.index("### The `Task` protocol"):
                   page.index("### The `TrainableModel` protocol")]
    (code,) = re.findall(r"^```python\n(.*?)^```$", section, re.M | re.S)
    namespace: dict[str, Any] = {"__name__": "__extending_doc__"}
    exec(compile(code, "docs/extending.md, The Task protocol", "exec"), namespace)
    task = namespace["task"]
    assert not any(c.__module__.startswith("nnx") for c in type(task).__mro__[:-1])
    run = namespace["run"]
    assert run.state()["task"] == {"kind": "example.scaled_error", "scale": 2.0}
    assert set(run.epoch_records()[-1].val_edp.metrics) == {"rmse"}
    assert task.rows_seen == 72
    assert capsys.readouterr().out.splitlines()[-1].startswith(
        "ScaledErrorTask has no default predict path")
    assert nnx.extend.Task is Task
