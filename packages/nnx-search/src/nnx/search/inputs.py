"""What makes a plan one the search can fit and score (spec §29's configuration errors).

Checked on the base plan before any trial, and again on every plan ``apply`` returns.
"""

from __future__ import annotations

from typing import Any

from nnx.extend import ExperimentPlan
from nnx.search.budget import SearchBudget

__all__ = ["plan_problems"]


def plan_problems(plan: Any, monitor: Any, budget: SearchBudget) -> list[str]:
    """Every reason ``plan`` cannot be a trial's plan (empty when it can); pure."""
    if not isinstance(plan, ExperimentPlan):
        return [f"apply must return an ExperimentPlan; got {type(plan).__name__}"]
    found = [str(d) for d in plan.validate()]
    if plan.callbacks:
        found.append("callbacks: a search fits every trial with fresh callbacks; pass "
                     "zero-argument factories with with_callback_factories(...) instead of "
                     "borrowed callbacks, which would carry state from trial to trial")
    for name in ("train", "val"):
        source = getattr(plan.data, name)
        if source is not None and not callable(source):
            found.append(f"data.{name}: a search builds every trial's data afresh; pass a "
                         f"zero-argument factory of the loader instead of a borrowed "
                         f"{type(source).__name__}, whose state every trial would share")
    own = plan.train.monitor
    if own is None or own.split != "val":
        found.append("train.monitor: trials are scored by a validation MonitorSpec; the plan "
                     f"has {own!r}")
    elif own != monitor:
        found.append(f"train.monitor: the plan monitors {own!r}, the search scores by "
                     f"{monitor!r}")
    if budget.updates_per_trial is not None and plan.train_step_fn is not None:
        found.append("train_step_fn: updates_per_trial needs a step that reports its updates; "
                     "a plan with its own train_step_fn may not")
    return found
