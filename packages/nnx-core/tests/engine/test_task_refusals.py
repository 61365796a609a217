"""What task adapters refuse (spec §6.3): a loss of another task or width, a loss without
scalar reduction, mismatched ignore_index, invalid batches, and incomplete accumulators."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _support.task_adapters import NAN, close, logits, ratio
from torch import nn

from nnx.metrics import MetricSpec
from nnx.tasks import (
    RegressionAdapter,
    TaskSpec,
    TaskValidationError,
    task_adapter,
)

# -- refusals ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("task", "loss", "needed"), [
    (TaskSpec.categorical(3), nn.MSELoss(), "CrossEntropyLoss or NLLLoss"),
    (TaskSpec.multilabel(3), nn.CrossEntropyLoss(), "BCEWithLogitsLoss"),
    (TaskSpec.multilabel(3), nn.BCELoss(), "BCEWithLogitsLoss"),
    (TaskSpec.regression(3), nn.BCEWithLogitsLoss(), "MSELoss, L1Loss"),
])
def test_a_loss_of_another_task_is_refused(task: TaskSpec, loss: nn.Module, needed: str) -> None:
    with pytest.raises(ValueError, match=f"does not suit a {task.kind} task: use {needed}"):
        task_adapter(task, loss)


def test_a_non_module_loss_is_refused() -> None:
    adapter = task_adapter(TaskSpec.regression(1), nn.MSELoss())
    with pytest.raises(ValueError, match=r"a loss must be an nn.Module"):
        adapter.check_loss(F.mse_loss)  # type: ignore[arg-type]


def test_a_loss_without_scalar_reduction_is_refused() -> None:
    with pytest.raises(ValueError, match=r"reduction='none'\) gives no scalar loss"):
        task_adapter(TaskSpec.regression(1), nn.MSELoss(reduction="none"))


def test_a_loss_ignore_index_differing_from_the_task_is_refused() -> None:
    with pytest.raises(ValueError, match=r"TaskSpec.ignore_index is 255 but "
                                         "CrossEntropyLoss.ignore_index is -100"):
        task_adapter(TaskSpec.categorical(3, ignore_index=255), nn.CrossEntropyLoss())


def test_a_loss_ignoring_a_real_class_is_refused() -> None:
    with pytest.raises(ValueError, match=r"ignore_index=1 is a class of this task"):
        task_adapter(TaskSpec.categorical(3), nn.NLLLoss(ignore_index=1))


def test_class_weights_of_another_width_are_refused() -> None:
    with pytest.raises(ValueError, match=r"has 2 class weights but the task has 3 classes"):
        task_adapter(TaskSpec.categorical(3), nn.CrossEntropyLoss(weight=torch.ones(2)))


def test_pos_weight_of_another_width_is_refused() -> None:
    with pytest.raises(ValueError, match=r"has 2 pos_weight entries but the task has 3 labels"):
        task_adapter(TaskSpec.multilabel(3), nn.BCEWithLogitsLoss(pos_weight=torch.ones(2)))


def test_task_adapter_refuses_a_non_taskspec() -> None:
    with pytest.raises(ValueError, match=r"task must be a TaskSpec or None"):
        task_adapter({"kind": "regression"}, nn.MSELoss())  # type: ignore[arg-type]


CAT = task_adapter(TaskSpec.categorical(3, ignore_index=-100), nn.CrossEntropyLoss())


ML = task_adapter(TaskSpec.multilabel(2), nn.BCEWithLogitsLoss())


REG = task_adapter(TaskSpec.regression(2), nn.MSELoss())


REG1 = task_adapter(TaskSpec.regression(1), nn.MSELoss())


@pytest.mark.parametrize(("adapter", "output", "target", "message"), [
    (CAT, logits(4, 3), torch.zeros(4), "must be integer class indices; got torch.float32"),
    (CAT, logits(4, 3), torch.tensor([0, 1, 3, 2]), r"class indices in \[0, 3\) or "
                                                     r"ignore_index=-100; got 3"),
    (CAT, logits(4, 3), torch.tensor([0, -1, 1, 2]), "got -1"),
    (CAT, logits(4, 3), torch.zeros(4, 1, dtype=torch.long), r"must be shaped \(4,\)"),
    (CAT, logits(4, 5), torch.zeros(4, dtype=torch.long), "has 5 classes on axis 1 but the "
                                                          "task declares 3"),
    (CAT, torch.zeros(4, 3, dtype=torch.long), torch.zeros(4, dtype=torch.long),
     "must be floating logits"),
    (ML, logits(4, 2), torch.full((4, 2), 2.0), "must be 0/1 .*; got 2.0"),
    (ML, logits(4, 2), torch.zeros(4, 2, 1), r"shaped like the output \(4, 2\)"),
    (ML, logits(4, 3), torch.zeros(4, 3), "task's 2 labels on axis 1"),
    (REG, logits(4, 2), torch.zeros(4, 2, dtype=torch.long), "must be floating; got torch.int64"),
    (REG, logits(4, 2), torch.zeros(4), "nothing broadcasts"),
    (REG1, logits(4, 1), torch.zeros(1, 4), "nothing broadcasts"),
    (REG1, logits(4, 1), torch.zeros(4, 4), "nothing broadcasts"),
    (REG, logits(4, 3), torch.zeros(4, 3), r"shaped \(N, 2, ...\)"),
])
def test_validation_refusals(adapter, output, target, message: str) -> None:
    with pytest.raises(TaskValidationError, match=message) as info:
        adapter.validate(output, target)
    assert isinstance(info.value, ValueError)


def test_a_custom_loss_refuses_a_masked_batch() -> None:
    class Custom(nn.Module):
        def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return (output - target).abs().mean()

    y = torch.tensor([[1.0, NAN]])
    for task in (TaskSpec.regression(2), TaskSpec.multilabel(2)):
        adapter = task_adapter(task, Custom())
        with pytest.raises(TaskValidationError, match=r"scores complete batches only"):
            adapter.loss_parts(logits(1, 2), y, adapter.loss_fn)


def test_accumulator_needs_numerator_and_denominator_together() -> None:
    acc = REG.accumulator()
    with pytest.raises(ValueError, match=r"pass loss_numerator and loss_denominator together"):
        acc.update(logits(2, 2), logits(2, 2), loss_numerator=1.0)


def test_accumulator_refuses_a_metric_the_model_cannot_provide_before_any_batch() -> None:
    with pytest.raises(ValueError, match=r"needs probabilities inputs"):
        REG.accumulator(metrics=[MetricSpec("nll")])


def test_adapter_types() -> None:
    assert isinstance(REG, RegressionAdapter) and REG.kind == "regression"
    assert REG.metric_inputs == frozenset({"continuous"})
    assert CAT.metric_inputs == frozenset({"labels", "probabilities"})


def test_default_loss_only_accepts_a_plain_callable() -> None:
    adapter = task_adapter(None, F.mse_loss)  # type: ignore[arg-type]
    out, y = logits(4, 2), logits(4, 2, seed=3)
    close(ratio(adapter.loss_parts(out, y, F.mse_loss)),  # type: ignore[arg-type]
          F.mse_loss(out, y))
    with pytest.raises(ValueError, match=r"a loss must be an nn.Module; got int"):
        task_adapter(None, 3)  # type: ignore[arg-type]
