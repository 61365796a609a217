"""The values an ExperimentPlan hands out (spec §20): diagnostics, metrics, results.

Kept apart from :mod:`nnx._surface.plans` so the plan module holds only the
branching and the fit, and the checks (:mod:`nnx._surface.plan_checks`) can
build diagnostics without importing the plan.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from nnx._foundation.records import NNEvaluationDataPoint, NNIterationDataPoint

__all__ = ["Diagnostic", "FitResult", "PlanData", "PlanError", "PlanValidation", "ProbeResult",
           "ResumeRequest", "SplitMetrics", "split_metrics"]


@dataclass(frozen=True)
class Diagnostic:
    """One problem of a plan: the field ``path`` (``"data.val"``, ``"callbacks[1]"``) and
    what is wrong there."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class PlanError(ValueError):
    """A plan that cannot fit: every :class:`Diagnostic` at once, in ``.diagnostics``."""

    def __init__(self, diagnostics: tuple[Diagnostic, ...]) -> None:
        self.diagnostics = tuple(diagnostics)
        lines = "\n  - ".join(str(d) for d in self.diagnostics)
        super().__init__(f"the experiment plan has {len(self.diagnostics)} problem(s):\n"
                         f"  - {lines}")


@dataclass(frozen=True)
class PlanValidation:
    """What ``ExperimentPlan.validate()`` found; empty (``ok``) when the plan can fit."""

    diagnostics: tuple[Diagnostic, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.diagnostics

    @property
    def paths(self) -> tuple[str, ...]:
        return tuple(d.path for d in self.diagnostics)

    def __iter__(self) -> Iterator[Diagnostic]:
        return iter(self.diagnostics)

    def __len__(self) -> int:
        return len(self.diagnostics)

    def raise_for_errors(self) -> None:
        """Raise :class:`PlanError` listing every diagnostic; nothing when ``ok``."""
        if self.diagnostics:
            raise PlanError(self.diagnostics)


@dataclass(frozen=True)
class PlanData:
    """The plan's data: training and validation sources (loaders, or zero-argument
    factories of them) and the data identity recorded as ``NNTrainParams.data_id``."""

    train: Any = None
    val: Any = None
    identity: str | None = None


@dataclass(frozen=True)
class ResumeRequest:
    """``resuming(run_id, checkpoint, mode, epochs)``; ``None`` mode / epochs: the training
    parameters' own ``resume_mode`` / ``resume_epochs`` apply."""

    run_id: str
    checkpoint: str = "last"
    mode: str | None = None
    epochs: str | None = None


@dataclass(frozen=True)
class ProbeResult:
    """One probe: the eval-mode raw output's shape, and the default step's loss on the batch
    (None without a target, for a plan with its own step or objective, or when every
    target is masked)."""

    output_shape: tuple[int, ...]
    loss: float | None


@dataclass(frozen=True)
class SplitMetrics:
    """One split's values from the run's final epoch, keyed as the logger callbacks key them
    (``loss``, ``accuracy``, ``metrics/<name>``, ``extra/<name>``). ``source`` is
    ``"epoch"`` (validation, or a declared whole-epoch training summary) or
    ``"last_batch"``; an unavailable split says why in ``reason``."""

    split: str
    available: bool
    epoch: int | None
    source: str | None
    values: Mapping[str, float] = field(default_factory=dict)
    reason: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "values", MappingProxyType(dict(self.values)))


@dataclass(frozen=True)
class FitResult:
    """``ExperimentPlan.fit()``: the trained model, its NNRun, the final epoch's
    ``metrics["train"]`` / ``metrics["val"]`` and the attempt id salted into the run."""

    model: Any
    run: Any
    metrics: Mapping[str, SplitMetrics]
    attempt_id: str


def _values(edp: NNEvaluationDataPoint) -> dict[str, float]:
    # The names the logger callbacks use (callbacks/_scalars.py), without the split
    # prefix; a non-finite value is kept as it is (a diverged loss stays visible).
    out: dict[str, float] = {}
    for name, value in edp.state().items():
        if name in ("metrics", "extra"):
            out.update({f"{name}/{k}": float(v) for k, v in value.items()})
        elif isinstance(value, float) or (isinstance(value, int) and name != "count"):
            out[name] = float(value)
    return out


def split_metrics(records: list[NNIterationDataPoint], *, has_val: bool
                  ) -> dict[str, SplitMetrics]:
    """``{"train": ..., "val": ...}`` from a run's epoch records (the last one); no
    loader is iterated again."""
    if not records:
        why = "the run committed no epoch"
        return {s: SplitMetrics(s, False, None, None, {}, why) for s in ("train", "val")}
    last = records[-1]
    summary = last.train_summary
    train_edp, source = (summary, "epoch") if summary is not None else (last.train_edp,
                                                                        "last_batch")
    train = (SplitMetrics("train", True, last.epoch, source, _values(train_edp))
             if train_edp is not None else
             SplitMetrics("train", False, last.epoch, None, {},
                          "the final epoch recorded no training values"))
    if last.val_edp is not None:
        val = SplitMetrics("val", True, last.epoch, "epoch", _values(last.val_edp))
    else:
        why = ("the plan has no validation data" if not has_val else
               "the final epoch recorded no validation")
        val = SplitMetrics("val", False, last.epoch, None, {}, why)
    return {"train": train, "val": val}

