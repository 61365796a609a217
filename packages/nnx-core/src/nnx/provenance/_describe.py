"""What ExperimentManifest.for_model reads from a model and its training config.

Only configuration states are read: no model is built, no loader iterated.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ATTEMPT_FIELDS", "model_descriptor", "model_task", "training_config"]

#: Training fields that describe one attempt, not the plan (spec §4.4, §14.3).
ATTEMPT_FIELDS = frozenset({"n_epochs", "resume_epochs", "parent_run_id", "parent_checkpoint"})


def _state(obj: Any, what: str) -> dict[str, Any]:
    if isinstance(obj, Mapping):
        return dict(obj)
    state = getattr(obj, "state", None)
    if not callable(state) or isinstance(obj, type):
        raise TypeError(f"{what} must be a params object with state(); got {type(obj).__name__}")
    result = state()
    if not isinstance(result, Mapping):
        raise TypeError(f"{what}.state() must return a mapping; got {type(result).__name__}")
    return dict(result)


def model_task(model: Any) -> dict[str, Any] | None:
    """The declared task's versioned state (TaskSpec.state()), or None."""
    task = getattr(model.params, "task", None)
    return None if task is None else _state(task, "model.params.task")


def model_descriptor(model: Any) -> dict[str, Any]:
    """The model params state (its task is recorded apart) and the net params state."""
    params = _state(model.params, "model.params")
    params.pop("task", None)
    net = getattr(model, "net_params", None)
    return {"params": params, "net": None if net is None else _state(net, "model.net_params")}


def training_config(train: Any) -> dict[str, Any]:
    """The training state without the fields that describe an attempt."""
    return {k: v for k, v in _state(train, "train").items() if k not in ATTEMPT_FIELDS}
