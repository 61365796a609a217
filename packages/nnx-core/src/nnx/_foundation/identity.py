"""Run identity (spec §4, §4.3): the run id is the md5 of the configuration.

The hashed document is ``{model[, net], train[, trainer][, task][, salt][, transforms]}``
(a Trainer run has no ``train`` block: its ``trainer`` block is the whole loop):
the states of the params objects, the optional salt string and the recorded
topology-transform recipes. The environment (library versions, hardware) is
never part of it, so identical configurations share an id by design; a salt
separates them deliberately.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nnx._foundation.hashing import md5_hex, plain

__all__ = ["check_salt", "run_id", "run_identity"]


def check_salt(salt: Any) -> str | None:
    """``None`` (no salt) or a non-empty string; anything else is refused."""
    if salt is None:
        return None
    if not isinstance(salt, str):
        raise TypeError(f"salt must be a non-empty string or None; got {type(salt).__name__}")
    if not salt:
        raise ValueError("salt must be a non-empty string or None; got ''")
    return salt


def _state(part: Any, what: str) -> dict[str, Any]:
    if isinstance(part, Mapping):
        return dict(plain(part, what))
    state = getattr(part, "state", None)
    if not callable(state):
        raise TypeError(f"{what} must be a params object or its state(); got {type(part).__name__}")
    result = state()
    assert isinstance(result, dict)
    return result


def run_identity(
    *,
    model: Any,
    train: Any | None = None,
    net: Any | None = None,
    trainer: Any | None = None,
    salt: str | None = None,
    transforms: Sequence[Any] = (),
    task: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The pre-id document the run id hashes (and run.yaml stores)."""
    doc: dict[str, Any] = {"model": _state(model, "model")}
    if net is not None:
        doc["net"] = _state(net, "net")
    if train is None and trainer is None:
        raise TypeError("a run configuration needs train (NNModel.train) or trainer "
                        "(Trainer.train) params")
    if train is not None:  # a Trainer run records its whole loop in the trainer block
        doc["train"] = _state(train, "train")
    if trainer is not None:
        doc["trainer"] = _state(trainer, "trainer")
    if task is not None:  # an add-on task's configuration (Task.identity); absent otherwise
        doc["task"] = dict(plain(task, "task"))
    salt = check_salt(salt)
    if salt is not None:
        doc["salt"] = salt
    if transforms:
        doc["transforms"] = [_state(t, f"transforms[{i}]") for i, t in enumerate(transforms)]
    return doc


def run_id(
    *,
    model: Any,
    train: Any | None = None,
    net: Any | None = None,
    trainer: Any | None = None,
    salt: str | None = None,
    transforms: Sequence[Any] = (),
    task: Mapping[str, Any] | None = None,
) -> str:
    """The run id: md5 of the canonical JSON of :func:`run_identity`."""
    return md5_hex(
        run_identity(
            model=model, train=train, net=net, trainer=trainer, salt=salt, transforms=transforms,
            task=task,
        )
    )
