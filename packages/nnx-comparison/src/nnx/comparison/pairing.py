"""compare(a, b, pairing=...): per replicate, delta = B - A (spec §23).

Each side is one poolable group with a unique replicate key per observation, and the
sides agree on everything but the configuration. The delta is never flipped: for a
metric to minimize, a negative delta means B is lower. A replicate on one side only is
listed as unmatched, a pair with a side that did not complete (or has no finite value)
has no delta, and a delta that overflows a float is counted, not averaged.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from nnx.comparison.bootstrap import Bootstrap, Interval
from nnx.comparison.errors import PairingError, PoolingError
from nnx.comparison.observation import POOL_FIELDS, Metric, Observation
from nnx.comparison.statistics import mean_std
from nnx.comparison.summary import GroupSummary, summarize

__all__ = ["PAIR_STATUSES", "Pair", "PairedComparison", "Unmatched", "compare"]

#: ok: a finite delta; incomplete: a side did not complete or has no finite value;
#: nonfinite: the delta overflowed.
PAIR_STATUSES = ("ok", "incomplete", "nonfinite")


@dataclass(frozen=True, slots=True)
class Pair:
    """One replicate on both sides; ``delta`` is B - A (None unless status is ok)."""

    replicate: str
    a: Observation
    b: Observation
    delta: float | None
    status: str


@dataclass(frozen=True, slots=True)
class Unmatched:
    """A replicate found on one side only (``side`` is "a" or "b")."""

    replicate: str
    side: str
    observation: Observation


@dataclass(frozen=True, slots=True)
class PairedComparison:
    """The pairs (A's order), the unmatched replicates and the deltas' statistics."""

    a: GroupSummary
    b: GroupSummary
    pairing: str
    pairs: tuple[Pair, ...]
    unmatched: tuple[Unmatched, ...]
    bootstrap: Bootstrap | None
    interval: Interval | None

    @property
    def metric(self) -> Metric:
        return self.a.metric

    @property
    def deltas(self) -> tuple[float, ...]:
        return tuple(p.delta for p in self.pairs if p.delta is not None)

    @property
    def n(self) -> int:
        return len(self.deltas)

    @property
    def mean(self) -> float | None:
        """Mean of B - A over the pairs with a delta."""
        return mean_std(self.deltas)[0]

    @property
    def std(self) -> float | None:
        return mean_std(self.deltas)[1]

    @property
    def n_nonfinite(self) -> int:
        return sum(p.status == "nonfinite" for p in self.pairs)

    @property
    def n_incomplete(self) -> int:
        return sum(p.status == "incomplete" for p in self.pairs)


def _side(name: str, side: Iterable[Observation] | GroupSummary) -> GroupSummary:
    if isinstance(side, GroupSummary):
        return side
    try:
        return summarize(side).pooled()
    except PoolingError as exc:
        raise PairingError(f"side {name} is not one poolable group: {exc}") from None


def _keyed(name: str, group: GroupSummary) -> dict[str, Observation]:
    out: dict[str, Observation] = {}
    for obs in group.observations:
        if obs.replicate is None:
            raise PairingError(f"side {name}: run {obs.run_id} has no replicate key (a run "
                               "without a training seed); it cannot be paired")
        if obs.replicate in out:
            raise PairingError(f"side {name}: replicate {obs.replicate!r} appears twice (runs "
                               f"{out[obs.replicate].run_id} and {obs.run_id})")
        out[obs.replicate] = obs
    return out


def _pair(replicate: str, a: Observation, b: Observation) -> Pair:
    if not (a.counted and b.counted):
        return Pair(replicate, a, b, None, "incomplete")
    delta = b.value - a.value  # type: ignore[operator]
    if not math.isfinite(delta):
        return Pair(replicate, a, b, None, "nonfinite")
    return Pair(replicate, a, b, delta, "ok")


def compare(a: Iterable[Observation] | GroupSummary, b: Iterable[Observation] | GroupSummary,
            *, pairing: str, bootstrap: Bootstrap | None = None) -> PairedComparison:
    """Pair ``a`` and ``b`` replicate by replicate; ``pairing`` declares what an equal
    replicate key means (an equal seed does not prove the same data order or split)."""
    if not isinstance(pairing, str) or not pairing.strip():
        raise PairingError("pairing= must say what an equal replicate key means "
                           "(e.g. 'seed: same data order and split'); got "
                           f"{pairing!r}")
    if bootstrap is not None and not isinstance(bootstrap, Bootstrap):
        raise TypeError(f"bootstrap must be a Bootstrap or None; got {type(bootstrap).__name__}")
    left, right = _side("A", a), _side("B", b)
    differ = [name for name in POOL_FIELDS
              if name != "config" and left.field(name) != right.field(name)]
    if differ:
        raise PairingError(f"the sides differ in {', '.join(differ)}; they may differ only "
                           "in the configuration")
    keyed_a, keyed_b = _keyed("A", left), _keyed("B", right)
    pairs = tuple(_pair(key, obs, keyed_b[key]) for key, obs in keyed_a.items()
                  if key in keyed_b)
    unmatched = tuple([Unmatched(k, "a", o) for k, o in keyed_a.items() if k not in keyed_b]
                      + [Unmatched(k, "b", o) for k, o in keyed_b.items() if k not in keyed_a])
    deltas = [p.delta for p in pairs if p.delta is not None]
    interval = None if bootstrap is None else bootstrap.interval(deltas)
    return PairedComparison(left, right, pairing, pairs, unmatched, bootstrap, interval)
