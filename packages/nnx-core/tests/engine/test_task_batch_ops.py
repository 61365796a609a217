"""The task's per-batch machinery is an object beside the task (issue 37): ``TaskRuntime``
composes the object answering the Task protocol with a ``TaskAdapter``, forwards nothing,
and add-ons reach the machinery through ``nnx.extend.task_batch_ops`` as ``TaskBatchOps``."""

from __future__ import annotations

from typing import Any

import torch

from nnx import Devices, Losses, NNModel, NNModelParams, NNParams, TaskSpec, extend
from nnx.tasks import (
    CategoricalAdapter,
    LossOnlyAdapter,
    TaskAdapter,
    TaskBatchOps,
    TaskRuntime,
    task_batch_ops,
)

NET = NNParams(input_dim=4, output_dim=3, hidden_dims=(8,))


class PlainTask:
    """The five protocol members and nothing else."""

    def objective(self) -> Any:
        return None

    def eval_step(self) -> Any:
        return None

    def metric_specs(self) -> tuple[Any, ...]:
        return ()

    def sample_ids(self, data: Any, rows: int) -> Any:
        return None

    def refuse_default(self, path: str) -> None:
        return None


def model(task: Any = None, **params: Any) -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NET, params=NNModelParams(device=Devices.CPU, **params),
                   task=task)


def test_the_runtime_composes_the_task_with_its_machinery_and_forwards_nothing():
    assert not issubclass(TaskRuntime, TaskAdapter)
    task = PlainTask()
    runtime = model(task).task_runtime
    assert runtime.task is task and isinstance(runtime.batch_ops, CategoricalAdapter)
    # No per-batch member on the runtime itself: the engine asks the machinery.
    for name in ("decode", "validate", "loss_parts", "training_batch", "accumulator", "record"):
        assert not hasattr(runtime, name), name


def test_one_object_is_both_without_a_task_object_or_with_an_adapter_one():
    declared = model(task=None, loss=Losses.MEAN_SQUARED_ERROR)
    assert declared.task_runtime.own_machinery
    assert declared.task_runtime.task is declared.task_runtime.batch_ops
    adapter = CategoricalAdapter(TaskSpec.categorical(3), torch.nn.CrossEntropyLoss())
    brought = model(adapter)
    assert brought.task_runtime.own_machinery and brought.task_adapter is adapter
    assert not model(PlainTask()).task_runtime.own_machinery


def test_task_batch_ops_is_the_public_view_of_the_machinery_for_the_live_loss():
    assert extend.task_batch_ops is task_batch_ops and extend.TaskBatchOps is TaskBatchOps
    lm = model(PlainTask())
    ops = task_batch_ops(lm)
    assert ops is lm.task_adapter is lm.task_runtime.batch_ops
    assert isinstance(ops, TaskBatchOps)
    output, target = torch.randn(4, 3), torch.tensor([0, 2, 1, 2])
    ops.validate(output, target)
    numerator, weight = ops.loss_parts(output, target, lm.loss_fn)
    assert float(weight) == 4 and ops.reduction(lm.loss_fn) == "mean"
    assert torch.allclose(numerator, torch.nn.functional.cross_entropy(output, target,
                                                                       reduction="sum"))
    assert torch.equal(ops.decode(output), output.argmax(1))
    lm.loss_fn = torch.nn.MSELoss()  # another loss: the machinery is rebuilt for it
    assert isinstance(task_batch_ops(lm), LossOnlyAdapter)
    assert lm.task_runtime.task is lm.task
