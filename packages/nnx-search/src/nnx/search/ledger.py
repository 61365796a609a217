"""The one budget every worker shares, counted under the study's storage.

A trial counts when it is running, completed, failed or pruned: a trial left running by
a dead worker (orphaned) is counted once, as running, or as failed once Optuna's
heartbeat check fails it. Enqueued trials that never ran do not count, nor does a trial
this module gave back (``UNRUN_ATTR``) because it lost the race for the last slot.

The race: workers create trials at once. Optuna numbers trials in creation order under
the storage, so a trial may run only while fewer than ``budget`` counted or waiting
trials precede it by number. A waiting (enqueued) trial is counted pessimistically
because it keeps its earlier number when a worker later runs it. Then the
highest-numbered trial that ran saw every other trial that ran before it, and at most
``budget`` trials ever run.
"""

from __future__ import annotations

import optuna
from optuna.trial import TrialState

__all__ = ["UNRUN_ATTR", "counted", "may_run"]

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
