"""TaskSpec: the task a model declares, stored versioned on NNModelParams.state()."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnx._foundation.validation import OPEN_UNIT, check_choice, check_count, check_real
from nnx.enums.losses import Losses

__all__ = ["TaskSpec"]

_VERSION = 1
_KINDS = ("categorical", "multilabel", "regression")


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskSpec:
    """A declared task: its kind, output width and decoding rule.

    Build one with :meth:`categorical`, :meth:`multilabel` or :meth:`regression`.
    """

    kind: str
    num_outputs: int
    threshold: float | None = None
    ignore_index: int | None = None

    def __post_init__(self) -> None:
        check_choice("TaskSpec.kind", self.kind, _KINDS)
        object.__setattr__(
            self, "num_outputs", check_count("TaskSpec.num_outputs", self.num_outputs)
        )
        if self.kind == "multilabel":
            threshold = 0.5 if self.threshold is None else self.threshold
            object.__setattr__(
                self, "threshold", check_real("TaskSpec.threshold", threshold, OPEN_UNIT)
            )
        elif self.threshold is not None:
            raise ValueError(f"TaskSpec.threshold applies to multilabel tasks, not {self.kind}")
        if self.ignore_index is not None:
            if self.kind != "categorical":
                raise ValueError(
                    f"TaskSpec.ignore_index applies to categorical tasks, not {self.kind}"
                )
            if isinstance(self.ignore_index, bool) or not isinstance(self.ignore_index, int):
                raise ValueError(
                    f"TaskSpec.ignore_index must be an integer; got {self.ignore_index!r}"
                )
        if self.kind == "categorical" and self.num_outputs < 2:
            raise ValueError("TaskSpec.num_outputs must be >= 2 for a categorical task")

    @classmethod
    def categorical(cls, num_classes: int, *, ignore_index: int | None = None) -> TaskSpec:
        return cls(kind="categorical", num_outputs=num_classes, ignore_index=ignore_index)

    @classmethod
    def multilabel(cls, num_labels: int, *, threshold: float = 0.5) -> TaskSpec:
        return cls(kind="multilabel", num_outputs=num_labels, threshold=threshold)

    @classmethod
    def regression(cls, num_targets: int = 1) -> TaskSpec:
        return cls(kind="regression", num_outputs=num_targets)

    def accepts_loss(self, loss: Losses) -> bool:
        """Whether ``loss`` suits this task."""
        if self.kind == "categorical":
            return loss.is_classification
        if self.kind == "multilabel":
            return loss is Losses.BINARY_CROSS_ENTROPY
        return loss.is_regression

    def state(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "version": _VERSION, "kind": self.kind, "num_outputs": self.num_outputs,
        }
        if self.kind == "multilabel":
            out["threshold"] = self.threshold
        if self.ignore_index is not None:
            out["ignore_index"] = self.ignore_index
        return out

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> TaskSpec:
        if not isinstance(state, Mapping) or state.get("version") != _VERSION:
            raise ValueError(
                f"TaskSpec state must be a mapping with version {_VERSION}; got {state!r}"
            )
        fields = {k: v for k, v in state.items() if k != "version"}
        unknown = set(fields) - {"kind", "num_outputs", "threshold", "ignore_index"}
        if unknown:
            raise ValueError(f"TaskSpec state has unknown field(s) {sorted(unknown)}")
        return cls(**fields)
