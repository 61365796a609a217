"""Budgeted experiment search (spec §29): an Optuna study over an ExperimentPlan.

:func:`search` samples a :class:`SearchSpace`, hands each trial's parameters to
``apply(plan, params)`` (a new plan; the base never changes), fits it with its own
attempt and run, and scores it by the run's own validation monitor at its BEST epoch. A
:class:`SearchBudget` bounds the trials (failed, pruned and orphaned ones count), the
optimizer updates of each trial and the wall clock; the caps never interrupt a step. A
stored study (an RDB URL or a JournalStorage) continues where it stopped, refuses
another space, monitor or plan (:class:`StudyMismatchError`), refuses a database it
cannot open (:class:`SearchStorageError`), and may be shared by several worker
processes or machines that honour one budget. Results are
:class:`SearchResult` of :class:`TrialOutcome`. Depends on nnx-core and Optuna.
"""

from nnx.search.budget import SearchBudget
from nnx.search.errors import (
    SearchConfigurationError,
    SearchStorageError,
    StudyMismatchError,
)
from nnx.search.report import STATES, STOP_REASONS, SearchResult, TrialOutcome
from nnx.search.run import search
from nnx.search.space import SearchSpace

__all__ = [
    "STATES",
    "STOP_REASONS",
    "SearchBudget",
    "SearchConfigurationError",
    "SearchResult",
    "SearchSpace",
    "SearchStorageError",
    "StudyMismatchError",
    "TrialOutcome",
    "search",
]
