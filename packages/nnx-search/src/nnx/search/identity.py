"""What a stored study is for: the space, the monitor and the base plan, recorded in the
study's user attributes when it is created and compared whenever it is reopened."""

from __future__ import annotations

import secrets
from typing import Any

import optuna

from nnx.extend import ExperimentPlan, canonical_bytes, sha256_hex
from nnx.search.errors import StudyMismatchError
from nnx.search.space import SearchSpace

__all__ = ["FORMAT", "IDENTITY_ATTR", "claim_identity", "plan_identity", "study_identity"]

IDENTITY_ATTR = "nnx.search"
FORMAT = "nnx.search/1"
_COMPARED = ("space", "monitor", "plan")


def _described(value: Any) -> Any:
    """A params object by its ``state()``; anything else by its type (an arbitrary
    module, a step function, an objective: what it is, not its weights)."""
    if value is None:
        return None
    state = getattr(value, "state", None)
    if callable(state):
        try:
            out = state()
            canonical_bytes(out)
            return out
        except (TypeError, ValueError):
            pass
    kind = type(value)
    return f"{kind.__module__}.{kind.__qualname__}"


def plan_identity(plan: ExperimentPlan) -> str:
    """SHA-256 of the base plan's configuration: net, model and training params (without
    the monitor), seed, data identity, resume and which step functions / objective it
    carries."""
    # The monitor is compared on its own (a study refuses "monitor", not "plan").
    train = {k: v for k, v in plan.train.state().items() if k != "monitor"}
    doc = {"net": _described(plan.net), "model": plan.model.state(),
           "train": train, "seed": plan.effective_seed,
           "data": plan.data.identity,
           "resume": None if plan.resume is None else list(vars(plan.resume).values()),
           "steps": [_described(plan.train_step_fn), _described(plan.eval_step_fn),
                     _described(plan.objective)]}
    return sha256_hex(canonical_bytes(doc))


def study_identity(space: SearchSpace, monitor: Any, direction: str,
                   plan: ExperimentPlan) -> dict[str, str]:
    return {"format": FORMAT, "space": space.identity,
            "monitor": sha256_hex(canonical_bytes({"monitor": monitor.state(),
                                                   "direction": direction})),
            "plan": plan_identity(plan)}


def claim_identity(study: optuna.Study, mine: dict[str, str]) -> str:
    """Record ``mine`` on a new study, or compare it with a stored one; returns the study's
    token (what trial attempt ids derive from, the same on every worker). Raises
    StudyMismatchError, changing nothing, when the stored study is for something else."""
    stored = study.user_attrs.get(IDENTITY_ATTR)
    if stored is None:
        # A new study: record it, then read back, so two workers creating one study at
        # once both continue with whichever record landed last (and compare with it).
        study.set_user_attr(IDENTITY_ATTR, {**mine, "token": secrets.token_hex(8)})
        stored = study.user_attrs[IDENTITY_ATTR]
    differing = tuple(k for k in ("format", *_COMPARED) if stored.get(k) != mine[k])
    if differing:
        raise StudyMismatchError(study.study_name, differing)
    return str(stored["token"])
