"""One observation: one metric's value for one attempt of one run (spec §23).

The identities stay apart: ``run_id`` names the run directory, ``attempt_id`` one
training attempt of it (None without a provenance record), ``replicate`` what a
comparison pairs on (``seed=3``), ``split`` the evaluation split's name and ``split_id``
its identity. Every fact that is not known stays None.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnx.extend import check_choice, check_optional_str

__all__ = ["DIRECTIONS", "POOL_FIELDS", "STATUSES", "Metric", "Observation"]

#: An attempt's completion status; "unknown" when no attempt record exists.
STATUSES = ("completed", "failed", "cancelled", "running", "unknown")
DIRECTIONS = ("min", "max")
#: What observations must share to pool (spec §23), in the order reports name them.
POOL_FIELDS = ("metric", "split", "selection", "config", "data", "split_id")
_TEXT_FIELDS = ("attempt_id", "split", "selection", "config", "data", "split_id", "replicate",
                "evaluation")


@dataclass(frozen=True, slots=True)
class Metric:
    """A metric's name, the direction that is better (``"min"`` / ``"max"``) and unit."""

    name: str
    direction: str
    unit: str | None = None

    def __post_init__(self) -> None:
        check_optional_str("Metric.name", self.name)
        if self.name is None:
            raise ValueError("Metric.name must be a metric name; got None")
        check_choice("Metric.direction", self.direction, DIRECTIONS)
        check_optional_str("Metric.unit", self.unit)

    def state(self) -> dict[str, Any]:
        return {"name": self.name, "direction": self.direction, "unit": self.unit}

    @classmethod
    def from_state(cls, state: Any) -> Metric:
        if not isinstance(state, Mapping) or set(state) != {"name", "direction", "unit"}:
            raise ValueError(f"a metric record has exactly name, direction and unit; got {state!r}")
        return cls(state["name"], state["direction"], state["unit"])


def encode_number(value: float | None) -> float | str | None:
    """A value as strict JSON: a non-finite float becomes its name, never NaN."""
    if value is None or math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def decode_number(value: Any, where: str) -> float | None:
    """:func:`encode_number` reversed; anything else is refused."""
    if value is None:
        return None
    if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity"):
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{where} must be a number, 'NaN', 'Infinity', '-Infinity' or null; "
                         f"got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Observation:
    """One attempt's value of one metric, with what decides pooling and pairing; the
    fields in the spec's order (``attempt_id`` None without an attempt record)."""

    run_id: str
    attempt_id: str | None
    metric: Metric
    value: float | None
    status: str = "unknown"
    split: str | None = None
    selection: str | None = None
    config: str | None = None
    data: str | None = None
    split_id: str | None = None
    replicate: str | None = None
    evaluation: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.run_id, str) or not self.run_id:
            raise ValueError(f"Observation.run_id must be a non-empty string; got {self.run_id!r}")
        if not isinstance(self.metric, Metric):
            raise TypeError(f"Observation.metric must be a Metric; got "
                            f"{type(self.metric).__name__}")
        if self.value is not None:
            if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
                raise ValueError(f"Observation.value must be a number or None; got "
                                 f"{self.value!r}")
            object.__setattr__(self, "value", float(self.value))
        check_choice("Observation.status", self.status, STATUSES)
        for name in _TEXT_FIELDS:
            check_optional_str(f"Observation.{name}", getattr(self, name))

    @property
    def counted(self) -> bool:
        """In ``n``: a completed attempt with a finite value."""
        return self.status == "completed" and self.value is not None and math.isfinite(
            self.value)

    @property
    def nonfinite(self) -> bool:
        """A completed attempt whose value is NaN or infinite (counted, never averaged)."""
        return self.status == "completed" and self.value is not None and not math.isfinite(
            self.value)

    def state(self) -> dict[str, Any]:
        """Plain, strict-JSON data (a non-finite value by its name)."""
        out: dict[str, Any] = {"run_id": self.run_id, "metric": self.metric.state(),
                               "value": encode_number(self.value), "status": self.status}
        out.update({name: getattr(self, name) for name in _TEXT_FIELDS})
        return out

    @classmethod
    def from_state(cls, state: Any) -> Observation:
        expected = {"run_id", "metric", "value", "status", *_TEXT_FIELDS}
        if not isinstance(state, Mapping) or set(state) != expected:
            got = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"an observation record has exactly {sorted(expected)}; got {got}")
        data = dict(state)
        data["metric"] = Metric.from_state(data["metric"])
        data["value"] = decode_number(data["value"], "observation value")
        return cls(**data)

    def pool_key(self) -> tuple[Any, ...]:
        """The values of :data:`POOL_FIELDS`; an unknown configuration pools with
        nothing, so its key is made unique by the caller."""
        return (self.metric, self.split, self.selection, self.config, self.data,
                self.split_id)
