"""Metrics a task computes itself (``TASK_METRIC_INPUT``, issue 39): served only where the
run's task lists them in ``metric_specs()``, whatever the model's loss; refused by every
row-by-row path before a batch is read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

from nnx import (
    Losses,
    MetricSpec,
    MonitorSpec,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNParams,
)
from nnx.extend import TASK_METRIC_INPUT
from nnx.metrics import check_metric_inputs, register_metric, unregister_metric
from nnx.streaming import StreamingMetrics
from nnx.tasks import task_adapter
from nnx.testing import tiny_batches, tiny_model, tiny_train_params

SPEC = MetricSpec("test.whole_stream", config={"cut": 2}, name="stream_score")


class _Unfed:
    """The registration's factory: a task-computed metric is never fed row by row."""

    def __init__(self, config: Any) -> None:
        self.config = config

    def update(self, target: Any, prediction: Any) -> None:
        raise AssertionError("a task-computed metric was fed a batch")

    def result(self) -> float:
        return float("nan")


@pytest.fixture(autouse=True)
def _registered() -> Iterator[None]:
    register_metric("test.whole_stream", 1, _Unfed, input=TASK_METRIC_INPUT, mode="max")
    yield
    unregister_metric("test.whole_stream", 1)


class StreamTask:
    """A Task-protocol object whose evaluation step reports ``stream_score`` over the whole
    validation stream, and lists it in metric_specs()."""

    def __init__(self, specs: tuple[MetricSpec, ...] = (SPEC,)) -> None:
        self.specs = specs

    def objective(self) -> None:
        return None

    def eval_step(self) -> Any:
        def whole_stream(ctx: Any) -> NNEvaluationDataPoint:
            with torch.no_grad():
                outs = [ctx.model.forward_raw(ctx.model.split_batch(b)[0])
                        for b in ctx.val_loader]
            score = float(torch.cat(outs).mean())
            return NNEvaluationDataPoint(loss=-score, metrics={"stream_score": score})
        return whole_stream

    def metric_specs(self) -> tuple[MetricSpec, ...]:
        return self.specs

    def sample_ids(self, data: Any, rows: int) -> None:
        return None

    def refuse_default(self, path: str) -> None:
        return None


def test_the_input_is_served_by_a_task_that_lists_the_spec_whatever_the_loss() -> None:
    for loss in (nn.CrossEntropyLoss(), nn.MSELoss()):
        adapter = task_adapter(None, loss)
        ((spec, registration),) = check_metric_inputs((SPEC,), adapter, task=StreamTask())
        assert spec == SPEC and registration.input == TASK_METRIC_INPUT == "task"
        with pytest.raises(ValueError, match="computed by a task's own evaluation step; no "
                                             "task computes it here"):
            check_metric_inputs((SPEC,), adapter)
        other = MetricSpec("test.whole_stream", config={"cut": 3}, name="stream_score")
        with pytest.raises(ValueError, match=r"StreamTask.metric_specs\(\) does not list"):
            check_metric_inputs((other,), adapter, task=StreamTask())


def test_the_row_by_row_paths_refuse_it_before_any_batch() -> None:
    model = tiny_model(0)
    with pytest.raises(ValueError, match="computed by a task's own evaluation step"):
        model.evaluate(tiny_batches(), metrics=[SPEC])
    with pytest.raises(ValueError, match="computed by a task's own evaluation step"):
        StreamingMetrics([SPEC], "continuous")


def test_a_run_monitors_the_metric_its_task_computes(tmp_path: Path) -> None:
    torch.manual_seed(0)
    # A regression loss: the metric does not depend on what core's adapter decodes.
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=1),
                    params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR), task=StreamTask())
    batches = [(x, y.float()[:, None]) for x, y in tiny_batches()]
    run = model.train(tiny_train_params(batches, n_epochs=2, val_loader=batches,
                                        metrics=(SPEC,), monitor=MonitorSpec("stream_score")),
                      root=tmp_path, verbose=False)
    assert all("stream_score" in r.val_edp.metrics for r in run.epoch_records())


def test_a_run_whose_task_does_not_list_it_is_refused_before_any_run_directory(
        tmp_path: Path) -> None:
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3),
                    params=NNModelParams(), task=StreamTask(specs=()))
    with pytest.raises(ValueError, match="does not list"):
        model.train(tiny_train_params(tiny_batches(), val_loader=tiny_batches(),
                                      metrics=(SPEC,)), root=tmp_path, verbose=False)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


class DefaultEvaluation(StreamTask):
    """Lists the metric, yet validates with the default evaluate(), row by row."""

    def eval_step(self) -> None:
        return None


def test_a_run_validated_row_by_row_is_refused_before_any_run_directory(
        tmp_path: Path) -> None:
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3),
                    params=NNModelParams(), task=DefaultEvaluation())
    with pytest.raises(ValueError, match="no task computes it here"):
        model.train(tiny_train_params(tiny_batches(), val_loader=tiny_batches(),
                                      metrics=(SPEC,)), root=tmp_path, verbose=False)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_a_plan_checks_the_metric_against_its_task() -> None:
    from nnx.plans import ExperimentPlan

    plan = ExperimentPlan(model=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR),
                          train=tiny_train_params(tiny_batches(), metrics=(SPEC,)),
                          net=NNParams(input_dim=4, output_dim=1), task=StreamTask(), seed=0)
    assert plan.validate().ok
    refused = plan.with_model(plan.model, task=None).validate()
    assert refused.paths == ("train.metrics[0]",)
    assert "no task computes it here" in refused.diagnostics[0].message
