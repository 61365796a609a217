"""What a stored study is for: the space, the monitor and the base plan, recorded in the
study's user attributes by the worker that created it and compared by every other worker,
when it opens the study and again before each trial."""

from __future__ import annotations

import secrets
import time
from typing import Any

import optuna

from nnx.extend import ExperimentPlan, canonical_bytes, sha256_hex
from nnx.search.errors import StudyMismatchError
from nnx.search.space import SearchSpace

__all__ = ["FORMAT", "IDENTITY_ATTR", "claim_identity", "claim_study_name", "plan_identity",
           "record_identity", "study_identity", "take_claim", "verify_identity"]

IDENTITY_ATTR = "nnx.search"
FORMAT = "nnx.search/1"
_COMPARED = ("space", "monitor", "plan")
#: How long a worker that lost the claim waits for the winner's identity record.
WAIT_SECONDS = 30.0


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


def _stored(study: optuna.Study) -> Any:
    return study.user_attrs.get(IDENTITY_ATTR)


def _compare(study: optuna.Study, stored: Any, mine: dict[str, str]) -> str:
    if not isinstance(stored, dict) or "token" not in stored:
        raise StudyMismatchError(study.study_name, ("identity",))
    differing = tuple(k for k in ("format", *_COMPARED) if stored.get(k) != mine[k])
    if differing:
        raise StudyMismatchError(study.study_name, differing)
    return str(stored["token"])


def claim_study_name(study_name: str) -> str:
    """The sibling study whose creation decides which worker records a study's identity."""
    return f"{study_name}.nnx-search-claim"


def take_claim(storage: Any, study_name: str) -> bool:
    """Whether this worker won the right to record ``study_name``'s identity: creating a
    study is the one step a storage lets only one worker win (the others get
    DuplicatedStudyError), and user attributes have no such step."""
    try:
        optuna.create_study(study_name=claim_study_name(study_name), storage=storage)
    except optuna.exceptions.DuplicatedStudyError:
        return False
    return True


def record_identity(study: optuna.Study, mine: dict[str, str]) -> str:
    """Record ``mine`` with a fresh token (only the claim's winner does); returns it."""
    study.set_user_attr(IDENTITY_ATTR, {**mine, "token": secrets.token_hex(8)})
    return _compare(study, _stored(study), mine)


def claim_identity(study: optuna.Study, mine: dict[str, str], storage: Any) -> str:
    """Compare ``mine`` with the study's identity, recording it first when the study has
    none and this worker wins the claim; returns the study's token (what trial attempt ids
    derive from, the same on every worker). Raises StudyMismatchError, changing nothing,
    when the stored study is for something else or is another program's (fields
    ``("identity",)``)."""
    waited_until: float | None = None
    while True:
        stored = _stored(study)
        if stored is not None:
            return _compare(study, stored, mine)
        # A search records the identity before any trial runs: a trial that started
        # without one is another program's and must not spend this search's budget
        # (trials only enqueued, never run, are a study prepared for the search).
        if any(t.state != optuna.trial.TrialState.WAITING
               for t in study.get_trials(deepcopy=False)):
            raise StudyMismatchError(study.study_name, ("identity",))
        if waited_until is None:
            if take_claim(storage, study.study_name):
                return record_identity(study, mine)
            waited_until = time.monotonic() + WAIT_SECONDS
        elif time.monotonic() >= waited_until:  # its winner died before recording it
            raise StudyMismatchError(study.study_name, ("identity",))
        _sleep(poll_seconds=0.1)


def verify_identity(study: optuna.Study, mine: dict[str, str], token: str) -> None:
    """Re-read the stored identity right before a trial: refuse one that changed since
    this worker claimed it (a worker that raced it, or an edited study)."""
    if _compare(study, _stored(study), mine) != token:
        raise StudyMismatchError(study.study_name, ("identity",))


def _sleep(poll_seconds: float) -> None:
    time.sleep(poll_seconds)  # a module function, so a test can interleave two workers here
