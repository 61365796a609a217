"""The one budget every worker shares, counted under the study's storage.

A trial counts when it is running, completed, failed or pruned: a trial left running by
a dead worker (orphaned) is counted once, as running, or as failed once Optuna's
heartbeat check fails it. Enqueued trials that never ran do not count, nor does a trial
this module gave back (``UNRUN_ATTR``) because it lost the race for the last slot.

Orphans under a heartbeat storage: Optuna fails a stale trial only when some worker
starts a trial, and no worker starts one once the budget is spent, so an orphan that
is the study's last trial would stay running. A worker whose search ends therefore
fails the stale trials itself, waiting up to the storage's grace period for running
trials to end or go stale (:func:`settle`).

The race: workers create trials at once. Optuna numbers trials in creation order under
the storage, so a trial may run only while fewer than ``budget`` counted or waiting
trials precede it by number. A waiting (enqueued) trial is counted pessimistically
because it keeps its earlier number when a worker later runs it. Then the
highest-numbered trial that ran saw every other trial that ran before it, and at most
``budget`` trials ever run.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

import optuna
from optuna.exceptions import ExperimentalWarning
from optuna.trial import TrialState

__all__ = ["UNRUN_ATTR", "counted", "may_run", "settle"]

UNRUN_ATTR = "nnx.search.unrun"
_COUNTED = (TrialState.RUNNING, TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)


def _trials(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return study.get_trials(deepcopy=False)


def counted(study: optuna.Study) -> int:
    """How many trials the study counts against the budget now, every worker's."""
    return sum(1 for t in _trials(study)
               if t.state in _COUNTED and not t.user_attrs.get(UNRUN_ATTR))


def may_run(study: optuna.Study, number: int, budget: int) -> bool:
    """Whether trial ``number`` (just created or taken from the queue) is within the
    budget: fewer than ``budget`` counted or waiting trials precede it."""
    before = sum(1 for t in _trials(study)
                 if t.number < number and not t.user_attrs.get(UNRUN_ATTR)
                 and (t.state in _COUNTED or t.state == TrialState.WAITING))
    return before < budget


def _fail_stale(study: optuna.Study) -> None:
    with warnings.catch_warnings():  # experimental in some Optuna releases; Optuna
        warnings.simplefilter("ignore", ExperimentalWarning)  # silences it the same way
        optuna.storages.fail_stale_trials(study)


def settle(study: optuna.Study, storage: Any, *, wait: bool) -> None:
    """Under a heartbeat storage, fail the study's stale trials (a dead worker's orphan);
    with ``wait``, keep looking until no trial runs or the storage's grace period (plus
    one heartbeat interval) has passed, so that an orphan whose worker died before this
    one finished ends failed, whichever trial it is. A live worker's trial keeps its
    heartbeat and is left running. Nothing to do without a heartbeat: there, a dead
    worker cannot be told from a slow one."""
    getter = getattr(storage, "get_heartbeat_interval", None)
    interval = getter() if callable(getter) else None
    if not interval:
        return
    grace = getattr(storage, "grace_period", None) or 2 * interval  # Optuna's default
    until = time.monotonic() + grace + interval
    while True:
        _fail_stale(study)
        if not wait or time.monotonic() >= until or not any(
                t.state == TrialState.RUNNING for t in _trials(study)):
            return
        time.sleep(min(1.0, interval))
