"""TrialOutcome and SearchResult: what a search hands back (spec §29)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nnx.extend import frozen_mapping

__all__ = ["STATES", "STOP_REASONS", "SearchResult", "TrialOutcome"]

#: A trial's state: its value scored it, it failed (``error`` says why) or it was pruned.
STATES = ("completed", "failed", "pruned")
#: Why a search stopped: its trial budget is spent, its deadline passed, the sampler
#: has no point left (an exhausted GridSampler; no budget spent), or a trial met a
#: configuration error (the ``.result`` of the SearchConfigurationError raised).
STOP_REASONS = ("budget", "deadline", "exhausted", "configuration")


@dataclass(frozen=True)
class TrialOutcome:
    """One trial of this search: its parameters, state and terminal ``reason``
    (``"completed"``, ``"updates_cap"``, ``"deadline"``, ``"pruned"``, ``"error"``,
    ``"no_value"``, ``"configuration"``), the best monitor ``value`` (the run's own
    decision at its BEST epoch, ``best_epoch``), the resources used (committed
    ``epochs`` and ``updates``, ``seconds``, the deadline ``overrun_seconds``), the
    pruning ``observations`` ((epoch, value) reported), and the attempt / run /
    checkpoint links."""

    number: int
    params: Mapping[str, Any]
    state: str
    reason: str
    value: float | None = None
    best_epoch: int | None = None
    error: str | None = None
    epochs: int = 0
    updates: int = 0
    seconds: float = 0.0
    overrun_seconds: float | None = None
    observations: tuple[tuple[int, float], ...] = ()
    attempt_id: str | None = None
    run_id: str | None = None
    run_path: str | None = None
    checkpoint: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", frozen_mapping(dict(self.params)))
        object.__setattr__(self, "observations", tuple(self.observations))


@dataclass(frozen=True)
class SearchResult:
    """The trials this call ran (``outcomes``, in order), why it stopped
    (``stop_reason``: ``"budget"``, ``"deadline"``, ``"exhausted"``, or
    ``"configuration"`` on a SearchConfigurationError's ``.result``), the study it ran
    on, and how many trials the study counts against the budget now (``counted``: every
    worker's, orphaned ones included)."""

    study_name: str
    direction: str
    stop_reason: str
    counted: int
    outcomes: tuple[TrialOutcome, ...] = field(default_factory=tuple)

    @property
    def best(self) -> TrialOutcome | None:
        """The completed trial of this call with the best finite value (the first of
        equals); other workers' and earlier calls' trials are in the study, not here."""
        done = [o for o in self.outcomes if o.state == "completed" and o.value is not None
                and math.isfinite(o.value)]
        if not done:
            return None
        pick = min if self.direction == "min" else max
        return pick(done, key=lambda o: o.value)  # type: ignore[arg-type,return-value]
