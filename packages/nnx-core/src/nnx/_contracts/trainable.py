"""TrainableModel: what the engine reads of a model (spec §6, §6.1, §6.5).

The steps, the update engine, the objectives and the loop are typed against
this protocol, not against :class:`nnx.NNModel`, so the engine never imports
the surface layer that builds on it. ``NNModel`` satisfies it structurally;
an add-on types its steps and objectives against it (``nnx.extend``).

Under DDP the training forward runs through the ``DistributedDataParallel``
wrapper, which the step context carries (``ctx.train_net``, ``ctx.forward``);
the model never holds it. :func:`step_model` gives the context's ``model`` the
same forward, so a custom step that calls ``ctx.model.forward_raw``
(docs/distributed.md) still trains synchronized.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from torch import nn

if TYPE_CHECKING:
    from nnx._contracts.batch_adapters import ModelInputs
    from nnx._foundation.records import NNEvaluationDataPoint
    from nnx.params.model import NNModelParams
    from nnx.params.net import NNParams
    from nnx.params.scheduler import NNSchedulerParams
    from nnx.tasks.adapters import TaskAdapter
    from nnx.tasks.runtime import TaskRuntime
    from nnx.transforms.recipe import TransformRecipe

__all__ = ["TrainableModel", "TrainingContextBase", "module_of", "step_model"]


def module_of(model_or_module: Any, *, owner: str | None = None) -> nn.Module:
    """An ``nn.Module`` as given, or a model's ``net`` (an NNModel's): what a helper that
    takes either works on (``nnx.benchmarking``, nnx-viz's helpers). TypeError otherwise,
    prefixed with ``owner`` when given."""
    if isinstance(model_or_module, nn.Module):
        return model_or_module
    net = getattr(model_or_module, "net", None)
    if isinstance(net, nn.Module):
        return net
    where = f"{owner}: " if owner else ""
    raise TypeError(f"{where}expected an nn.Module or a model with a .net module; got "
                    f"{type(model_or_module).__name__}")


class TrainableModel(Protocol):
    """The members of a model that NNx's training engine uses, each for one reason."""

    @property
    def net(self) -> nn.Module:
        """The module trained, optimized, checkpointed and wrapped for DDP."""

    @property
    def device(self) -> torch.device:
        """Where batches go and the DDP session's device."""

    @property
    def loss_fn(self) -> nn.Module:
        """The loss the default step and the supervised objective apply."""

    @property
    def task_runtime(self) -> TaskRuntime:
        """The model's task as the engine uses it (§6.3): ``task`` answers the Task
        protocol, ``batch_ops`` is the per-batch machinery (nnx.tasks.resolve_task)."""

    @property
    def task_adapter(self) -> TaskAdapter:
        """The task's per-batch machinery (``task_runtime.batch_ops``): loss parts,
        validation, records, accumulators and decoding."""

    @property
    def params(self) -> NNModelParams:
        """The model's config: precision, task, and its part of the run id."""

    @property
    def net_params(self) -> NNParams | None:
        """A built-in net's config, for the run id (None for a registered or wrapped one)."""

    @property
    def transforms(self) -> tuple[TransformRecipe, ...]:
        """The materialized topology transforms (§4.2): in the run id and every checkpoint."""

    def split_batch(self, batch: Any) -> tuple[ModelInputs, torch.Tensor | None]:
        """A batch as ``(inputs, target)`` on the model's device."""

    def forward_raw(self, inputs: Sequence[Any], *,
                    net: nn.Module | None = None) -> torch.Tensor:
        """The output tensor of ``net`` (``self.net`` when None; the step context passes
        the DDP wrapper) on ``inputs``."""

    def evaluate(self, loader: Any, metrics: Sequence[Any] = (),
                 extra_metrics: Mapping[str, Callable[..., Any]] | None = None
                 ) -> NNEvaluationDataPoint:
        """The default validation of an epoch (no ``eval_step_fn``)."""

    def _build_scheduler(self, optimizer: torch.optim.Optimizer, params: NNSchedulerParams,
                         n_epochs: int, *, updates_per_epoch: int | None = None,
                         plateau_rule: tuple[str, float, str] | None = None) -> Any:
        """The torch scheduler of a schedule: the override point of spec §2.5."""


class _DistributedModel:
    """A model whose ``forward_raw`` runs through the DDP wrapper; every other read and
    write is the model's own (``ctx.model.net`` stays the unwrapped net)."""

    __slots__ = ("_model", "_train_net")
    _model: TrainableModel
    _train_net: nn.Module

    def __init__(self, model: TrainableModel, train_net: nn.Module) -> None:
        object.__setattr__(self, "_model", model)
        object.__setattr__(self, "_train_net", train_net)

    def forward_raw(self, inputs: Sequence[Any], *,
                    net: nn.Module | None = None) -> torch.Tensor:
        return self._model.forward_raw(inputs, net=self._train_net if net is None else net)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._model, name, value)

    def __repr__(self) -> str:
        return repr(self._model)

    # Spec §6.1 says ctx.model is the NNModel: isinstance(ctx.model, NNModel) holds under
    # DDP too (isinstance falls back to __class__, as unittest.mock's spec does).
    @property  # type: ignore[misc]
    def __class__(self) -> type:
        return type(self._model)


def step_model(model: TrainableModel, train_net: nn.Module | None) -> TrainableModel:
    """The model a step context hands out: ``model`` itself, or under DDP (``train_net``
    the wrapper) the model with its forward through the wrapper."""
    if train_net is None or isinstance(model, _DistributedModel):
        return model
    # The other members are delegated by __getattr__, which a protocol check cannot see.
    return cast("TrainableModel", _DistributedModel(model, train_net))


class TrainingContextBase:
    """What every training context shares (TrainStepContext, ObjectiveContext,
    TrainerStepContext): ``model`` is the model, or under DDP its view whose forward
    runs through ``train_net``; ``forward`` is the training forward a step calls."""

    model: TrainableModel
    train_net: nn.Module | None
    epoch: int

    def __post_init__(self) -> None:
        self.model = step_model(self.model, self.train_net)

    @property
    def device(self) -> torch.device:
        return self.model.device

    def forward(self, inputs: Sequence[Any]) -> torch.Tensor:
        """The training forward of ``inputs`` (``model.forward_raw``, through the DDP
        wrapper under DDP)."""
        return self.model.forward_raw(inputs, net=self.train_net)

    @property
    def epoch_idx(self) -> int:
        """``epoch`` under the name EvalStepContext uses (§6.2); read-only."""
        return self.epoch
