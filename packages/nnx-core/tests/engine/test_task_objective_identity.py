"""An objective built by a task carries the task (issue 26 item 6; spec §10.1's rule for
the offline objective, for every task objective).

``NNModel.train(objective=task.objective())`` trains under the task as ``task=task`` does:
its identity enters the run id and its component state is checkpointed, so a resume
under another task configuration is refused before anything is restored.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from nnx import (
    ComponentSpec,
    Devices,
    LossTerm,
    NNModel,
    NNModelParams,
    NNParams,
    NNRun,
    Objective,
    ObjectiveResult,
)
from nnx.components import ComponentRestoreError
from nnx.tasks import Task
from nnx.tasks.protocol import objective_task
from nnx.testing import tiny_train_params, weights

NET = NNParams(input_dim=4, output_dim=3, hidden_dims=(8,))


class SmoothedCE(Objective):
    """The task's objective: it names the task that built it (core's ``source_task``)."""

    def __init__(self, task: SmoothingTask) -> None:
        self.source_task = task
        self.calls = 0

    def __call__(self, ctx: Any) -> ObjectiveResult:
        self.calls += 1
        inputs, y = ctx.split()
        out = ctx.full_precision(ctx.forward(inputs))
        total = F.cross_entropy(out, y, reduction="sum",
                                label_smoothing=self.source_task.smoothing)
        return ObjectiveResult((LossTerm("ce", total, float(len(y))),))


class SmoothingTask:
    """A task whose configuration is its identity and its (checked) component state."""

    def __init__(self, smoothing: float) -> None:
        self.smoothing = smoothing

    def objective(self) -> SmoothedCE:
        return SmoothedCE(self)

    def eval_step(self) -> None:
        return None

    def metric_specs(self) -> tuple[Any, ...]:
        return ()

    def sample_ids(self, data: Any, rows: int) -> None:
        return None

    def refuse_default(self, path: str) -> None:
        return None

    def identity(self) -> dict[str, Any]:
        return {"kind": "test.smoothing", "smoothing": self.smoothing}

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("test.smoothing_task")

    def component_state(self) -> dict[str, float]:
        return {"smoothing": self.smoothing}

    def check_component_state(self, state: dict[str, float], *, version: int) -> list[str]:
        saved = state.get("smoothing")
        return [] if saved == self.smoothing else [
            f"trained with smoothing={saved}, this task has {self.smoothing}"]

    def load_component_state(self, state: dict[str, float], *, version: int) -> None:
        self.smoothing = state["smoothing"]


def bare(seed: int = 0, task: Any = None) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(net_params=NET, params=NNModelParams(device=Devices.CPU), task=task)


def test_the_objective_carries_the_task_s_identity_into_the_run_id(tmp_path) -> None:
    task = SmoothingTask(0.1)
    assert isinstance(task, Task) and objective_task(task.objective()) is task
    run = bare().train(tiny_train_params(), objective=task.objective(), root=tmp_path,
                       verbose=False)
    assert run.state()["task"] == {"kind": "test.smoothing", "smoothing": 0.1}
    as_task = bare(task=SmoothingTask(0.1)).train(tiny_train_params(), root=tmp_path / "t",
                                                  verbose=False)
    assert as_task.id == run.id  # objective=task.objective() is task=task for the id
    other = bare().train(tiny_train_params(), objective=SmoothingTask(0.2).objective(),
                         root=tmp_path, verbose=False)
    assert other.id != run.id
    assert NNRun.load(run.id, root=tmp_path).task == run.state()["task"]


def test_a_resume_with_another_task_configuration_is_refused_before_anything(tmp_path) -> None:
    run = bare().train(tiny_train_params(), objective=SmoothingTask(0.1).objective(),
                       root=tmp_path, verbose=False)
    other_task = SmoothingTask(0.2)
    objective = other_task.objective()
    model = bare(seed=5)
    before = weights(model)
    with pytest.raises(ComponentRestoreError,
                       match=r"test\.smoothing_task: trained with smoothing=0\.1, this task "
                             r"has 0\.2"):
        model.train(tiny_train_params(resume_from_run_id=run.id), objective=objective,
                    root=tmp_path, verbose=False)
    assert objective.calls == 0 and other_task.smoothing == 0.2  # nothing ran or loaded
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())


def test_a_resume_with_the_same_task_configuration_works(tmp_path) -> None:
    run = bare().train(tiny_train_params(), objective=SmoothingTask(0.1).objective(),
                       root=tmp_path, verbose=False)
    objective = SmoothingTask(0.1).objective()
    model = bare(seed=5)
    before = weights(model)
    again = model.train(tiny_train_params(resume_from_run_id=run.id), objective=objective,
                        root=tmp_path, verbose=False)
    assert objective.calls > 0 and again.state()["task"] == run.state()["task"]
    assert any(not torch.equal(before[k], v) for k, v in weights(model).items())


def test_an_objective_of_another_task_than_the_model_s_is_refused_first(tmp_path) -> None:
    model = bare(task=SmoothingTask(0.1))
    before = weights(model)
    with pytest.raises(ValueError, match=r"objective= was built by the task .* but the "
                                         r"model's task is"):
        model.train(tiny_train_params(), objective=SmoothingTask(0.2).objective(),
                    root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())
    # One configuration in two objects is one task: the model's stands for both.
    run = model.train(tiny_train_params(), objective=SmoothingTask(0.1).objective(),
                      root=tmp_path / "runs", verbose=False)
    assert run.state()["task"] == {"kind": "test.smoothing", "smoothing": 0.1}


def test_a_source_task_that_is_not_a_task_is_refused() -> None:
    objective = SmoothingTask(0.1).objective()
    objective.source_task = "smoothing"  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"SmoothedCE\.source_task must be the Task"):
        objective_task(objective)
    assert objective_task(lambda ctx: None) is None  # a plain callable has no task


def test_a_component_refusal_names_the_component_once() -> None:
    """issue 26 item 8: a problem that already starts with its component's name (as
    nnx-lm's "lm.causal_task: ...") is not prefixed a second time."""
    from nnx._contracts.components import check_components

    class Named(SmoothingTask):
        def check_component_state(self, state: dict[str, float], *, version: int
                                  ) -> list[str]:
            return [f"test.smoothing_task: {p}" for p in super().check_component_state(
                state, version=version)]

    saved = {"test.smoothing_task": {"version": 1, "required": True,
                                     "state": {"smoothing": 0.1}}}
    for task in (SmoothingTask(0.2), Named(0.2)):
        components = {"test.smoothing_task": (task.component_spec(), task)}
        assert check_components(components, saved) == [
            "test.smoothing_task: trained with smoothing=0.1, this task has 0.2"]
