"""Label and model binding (spec §18): declared labels and model id against the fitted ones.

A difference is refused unless a named override accepts it, and an accepted one is
recorded (each mismatch, expected vs actual) so it travels with the result and the
report. The comparison reads only the declarations, never the logits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from nnx.calibration.errors import CalibrationError, CalibrationMismatchError

__all__ = ["OVERRIDES", "check_identity", "overrides"]

#: The named overrides: a reordered label list, a renamed one, another model.
OVERRIDES = ("label_order", "label_names", "model_id")


def overrides(override: str | Iterable[str] | None) -> tuple[str, ...]:
    """The override names given (one string or several), each one of :data:`OVERRIDES`."""
    if override is None:
        return ()
    names = (override,) if isinstance(override, str) else tuple(override)
    unknown = [n for n in names if n not in OVERRIDES]
    if unknown or not all(isinstance(n, str) for n in names):
        raise CalibrationError(f"override must name one of {list(OVERRIDES)}; got {override!r}")
    return tuple(sorted(set(names)))


def check_identity(fitted_labels: tuple[Any, ...], fitted_model: str,
                   labels: tuple[Any, ...], model_id: Any,
                   override: str | Iterable[str] | None) -> dict[str, Any] | None:
    """The override record (None when nothing differs), or CalibrationMismatchError."""
    accepted = overrides(override)
    if not isinstance(model_id, str) or not model_id:
        raise CalibrationError(f"model_id= must be a non-empty string; got {model_id!r}")
    if len(labels) != len(fitted_labels):
        raise CalibrationMismatchError(
            f"the calibrator was fitted on {len(fitted_labels)} classes {list(fitted_labels)}; "
            f"got {len(labels)} labels {list(labels)} (a different class count is never "
            "accepted)")
    mismatches: list[dict[str, Any]] = []
    needed: list[str] = []
    if labels != fitted_labels:
        kind = "label_order" if sorted(map(repr, labels)) == sorted(
            map(repr, fitted_labels)) else "label_names"
        needed.append(kind)
        mismatches.append({"field": "labels", "expected": list(fitted_labels),
                           "actual": list(labels)})
    if model_id != fitted_model:
        needed.append("model_id")
        mismatches.append({"field": "model_id", "expected": fitted_model, "actual": model_id})
    refused = [n for n in needed if n not in accepted]
    if refused:
        lines = "; ".join(f"{m['field']}: expected {m['expected']!r}, got {m['actual']!r}"
                          for m in mismatches)
        raise CalibrationMismatchError(
            f"declared identity differs from the fitted one ({lines}); pass "
            f"override={refused[0]!r} to accept it on purpose" if len(refused) == 1 else
            f"declared identity differs from the fitted one ({lines}); pass "
            f"override={tuple(refused)!r} to accept it on purpose")
    if not mismatches:
        return None
    return {"accepted": [n for n in accepted if n in needed], "mismatches": mismatches}
