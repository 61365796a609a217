"""The objective contract (spec §6.5): what an objective returns and what it sees.

An objective describes the loss of one microbatch and nothing else: it never
zeroes, back-propagates, scales or steps. The shared update engine
(:mod:`nnx._engine.update_engine`) owns the update. Each :class:`LossTerm` carries a
differentiable numerator (the term summed over its samples) and either a
denominator (``reduction="mean"``: how many samples, or how much weight, the
numerator sums over) or none (``reduction="sum"``). The engine divides summed
numerators by summed denominators at the window's end, which is what makes
uneven microbatches and short windows reduce exactly like one full batch.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar

import torch
from torch import nn

from nnx._contracts.trainable import TrainableModel, TrainingContextBase
from nnx._foundation.validation import check_choice

if TYPE_CHECKING:
    from nnx._contracts.precision import ResolvedPrecision

__all__ = ["LossTerm", "Objective", "ObjectiveContext", "ObjectiveResult", "UpdateEvent"]

NONFINITE_POLICIES = ("fail", "skip")


@dataclass(frozen=True, eq=False)
class LossTerm:
    """One named part of a microbatch's loss.

    ``numerator`` is the term summed over its samples (a differentiable scalar
    tensor). ``denominator`` is what it sums over: a count or a total weight,
    0 when every sample is masked; ``None`` makes the term a sum
    (``reduction="sum"``). ``weight`` scales the term in the combined loss; a
    term of weight 0 is never back-propagated.
    """

    name: str
    numerator: torch.Tensor
    denominator: float | torch.Tensor | None = None  # stored as a float
    weight: float = 1.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"LossTerm.name must be a non-empty string; got {self.name!r}")
        if not isinstance(self.numerator, torch.Tensor) or self.numerator.numel() != 1:
            raise TypeError(f"LossTerm {self.name!r}: the numerator must be a one-element "
                            f"tensor (the term summed over its samples); got "
                            f"{type(self.numerator).__name__}")
        weight = self.weight
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(
                weight):
            raise ValueError(f"LossTerm {self.name!r}: weight must be a finite number; got "
                             f"{weight!r}")
        den = self.denominator
        if den is not None:
            value = float(den.detach()) if isinstance(den, torch.Tensor) else den
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                    math.isfinite(value) and value >= 0):
                raise ValueError(f"LossTerm {self.name!r}: the denominator must be a finite "
                                 f"count or weight >= 0 (or None for a sum); got {den!r}")
            object.__setattr__(self, "denominator", float(value))

    @property
    def reduction(self) -> str:
        return "sum" if self.denominator is None else "mean"

    @property
    def masked(self) -> bool:
        """Every sample of a normalized term is masked: it contributes nothing."""
        return self.denominator is not None and float(self.denominator) == 0.0


@dataclass(frozen=True, eq=False)
class ObjectiveResult:
    """A microbatch's loss terms, detached metrics, and (optionally) the output and
    target the record's classification fields are computed from."""

    terms: Sequence[LossTerm]
    metrics: Mapping[str, float] = field(default_factory=dict)
    output: torch.Tensor | None = None
    target: Any = None

    def __post_init__(self) -> None:
        terms = tuple(self.terms) if isinstance(self.terms, (list, tuple)) else None
        if not terms or not all(isinstance(t, LossTerm) for t in terms):
            raise TypeError("ObjectiveResult.terms must be a non-empty sequence of LossTerm")
        names = [t.name for t in terms]
        if len(set(names)) != len(names):
            raise ValueError(f"ObjectiveResult: term names must be unique; got {names}")
        object.__setattr__(self, "terms", terms)
        metrics = {}
        for name, value in dict(self.metrics).items():
            metrics[str(name)] = float(value.detach()) if isinstance(value, torch.Tensor) else (
                float(value))
        object.__setattr__(self, "metrics", MappingProxyType(metrics))


@dataclass(eq=False)
class ObjectiveContext(TrainingContextBase):
    """What an objective sees for one microbatch.

    The objective runs under the run's autocast, so a reduced run's outputs are
    float16 / bfloat16: pass them through :meth:`full_precision` before the
    loss's bookkeeping or anything that converts to NumPy. Run the model with
    :meth:`forward` (under DDP through the wrapper, ``train_net``;
    ``ctx.model.forward_raw`` does the same).
    """

    model: TrainableModel
    batch: Any
    batch_idx: int
    epoch: int
    precision: ResolvedPrecision
    microbatch: int = 0  # the position in the update window
    # The DistributedDataParallel wrapper of model.net under DDP, None otherwise.
    train_net: nn.Module | None = field(repr=False, default=None)

    def split(self) -> tuple[Any, Any]:
        """The batch split by the model's adapter: (inputs, target)."""
        return self.model.split_batch(self.batch)

    @staticmethod
    def full_precision(output: torch.Tensor) -> torch.Tensor:
        """``output`` as float32, still differentiable."""
        return output.float() if output.is_floating_point() else output


@dataclass(frozen=True)
class UpdateEvent:
    """One committed optimizer update, detached (delivered to ``on_optimizer_update``).

    ``optimizer`` is the Trainer's name for it (None under NNModel.train);
    ``update_index`` counts that optimizer's updates (1 for the first);
    ``update_count`` is the run's committed-update counter after this commit;
    ``terms`` holds each term's window value (Σ numerators / Σ denominators,
    or Σ numerators for a sum).
    """

    optimizer: str | None
    update_index: int
    update_count: int
    epoch: int
    batch_idx: int
    microbatches: int
    terms: Mapping[str, float]


class Objective(ABC):
    """Base class for objectives: subclass it to declare ``nonfinite`` and the hooks.

    Any callable ``(ObjectiveContext) -> ObjectiveResult`` is an objective;
    subclassing adds:

    * ``nonfinite``: ``"fail"`` (default) raises FloatingPointError before
      anything is stepped; ``"skip"`` drops the window's gradients.
    * ``check_run(model, *, optimizers, callbacks)``: called with the built
      optimizers before any run is reserved; raise to refuse.
    * ``after_update(events)``: called once per committed update, after the
      window's step and before callbacks see the events.
    * ``source_task``: the task whose ``objective()`` built this objective (None
      for an objective of its own). ``NNModel.train(objective=task.objective())``
      then trains under that task as ``task=`` would: its identity enters the run
      id and a task that is a component is checkpointed, so a resume under another
      task configuration is refused before anything is restored
      (:func:`nnx.tasks.protocol.objective_task`).
    """

    nonfinite: ClassVar[str] = "fail"
    source_task: Any = None

    @abstractmethod
    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        """The microbatch's loss terms."""

    def check_run(self, model: TrainableModel, *, optimizers: Mapping[str | None, Any],  # noqa: B027
                  callbacks: Sequence[Any]) -> None:
        """Refuse a combination this objective cannot train (before any run exists)."""

    def after_update(self, events: Sequence[UpdateEvent]) -> None:  # noqa: B027
        """Called once per committed update, before the callbacks see ``events``."""


def nonfinite_policy(objective: Any) -> str:
    policy = getattr(objective, "nonfinite", "fail")
    check_choice("objective.nonfinite", policy, NONFINITE_POLICIES)
    return str(policy)
