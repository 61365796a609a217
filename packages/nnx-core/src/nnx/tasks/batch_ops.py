"""``TaskBatchOps``: the per-batch machinery of a model's task, as add-ons may use it.

A model's task is two objects (:mod:`nnx.tasks.runtime`): the task object answers
the :class:`~nnx.tasks.Task` protocol, and a :class:`~nnx.tasks.TaskAdapter` does the
per-batch work: target validation, the loss's numerator and normalization weight,
decoding, the record the default step writes. :func:`task_batch_ops` hands an add-on
that second object, typed as the members below, the only ones an add-on may call
(docs/extending.md, "The per-batch machinery"). Every built-in adapter, and the
default one core puts next to a protocol-only task, satisfies it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # type-only: the protocol itself imports no torch
    from torch import Tensor, nn

    from nnx._foundation.records import NNEvaluationDataPoint
    from nnx.tasks.runtime import TaskRuntime

__all__ = ["TaskBatchOps", "task_batch_ops"]


@runtime_checkable
class TaskBatchOps(Protocol):
    """What an add-on may ask of a model's per-batch task machinery."""

    @property
    def kind(self) -> str | None:
        """The declared task kind (``categorical`` / ``multilabel`` / ``regression``);
        None without a declared TaskSpec."""

    @property
    def metric_kind(self) -> str | None:
        """How labels are decoded (the kinds above); None for loss-only records."""

    @property
    def num_outputs(self) -> int | None:
        """The declared output width (None without a declared TaskSpec)."""

    @property
    def description(self) -> str:
        """One line naming the task and its loss, for messages."""

    def validate(self, output: Tensor, target: Tensor) -> None:
        """Raise :class:`~nnx.tasks.TaskValidationError` for a wrong shape, dtype or
        value, before anything is back-propagated."""

    def loss_parts(self, output: Tensor, target: Tensor,
                   loss_fn: nn.Module) -> tuple[Tensor, Tensor]:
        """(differentiable summed loss over the valid targets, its normalization weight)."""

    def reduction(self, loss_fn: nn.Module) -> str:
        """``"sum"`` when ``loss_fn`` sums (numerators add up), else ``"mean"``."""

    def decode(self, output: Tensor) -> Tensor:
        """Predictions: class indices, 0/1 indicators or the values themselves."""

    def probabilities(self, output: Tensor) -> Tensor:
        """Class probabilities (categorical) or element-wise sigmoid (multilabel); a
        task without them raises ``ValueError``."""

    def record(self, output: Tensor, target: Tensor, loss: Any = None, *,
               validate: bool = True) -> NNEvaluationDataPoint:
        """The one-batch record the default step writes (``loss`` as given)."""


class _TaskedModel(Protocol):
    """The one member of ``TrainableModel`` read here (``_contracts`` imports ``tasks``,
    so ``tasks`` must not import it back)."""

    @property
    def task_runtime(self) -> TaskRuntime: ...


def task_batch_ops(model: _TaskedModel) -> TaskBatchOps:
    """The per-batch machinery of ``model``'s task, for its live ``loss_fn``."""
    return model.task_runtime.batch_ops
