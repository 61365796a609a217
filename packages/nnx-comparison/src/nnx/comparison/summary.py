"""summarize: observations as populations, one GroupSummary per poolable group (spec §23).

Observations pool only when they share every field of ``POOL_FIELDS``; anything else is
stratified, the fields that differ named, and :meth:`Summary.pooled` refuses. An unknown
configuration (None) pools with nothing. Failed and non-finite attempts stay listed and
counted; only completed attempts with a finite value are in ``n``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from nnx.comparison.errors import DuplicateObservationError, PoolingError
from nnx.comparison.observation import POOL_FIELDS, Metric, Observation
from nnx.comparison.statistics import mean_std

__all__ = ["GroupSummary", "Summary", "summarize"]


@dataclass(frozen=True, slots=True)
class GroupSummary:
    """One poolable group: its shared fields, its observations (input order) and counts."""

    metric: Metric
    split: str | None
    selection: str | None
    config: str | None
    data: str | None
    split_id: str | None
    observations: tuple[Observation, ...]
    differing: tuple[str, ...]

    @property
    def values(self) -> tuple[float, ...]:
        """The values ``n`` counts: completed attempts with a finite value."""
        return tuple(o.value for o in self.observations if o.counted)  # type: ignore[misc]

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return mean_std(self.values)[0]

    @property
    def std(self) -> float | None:
        """Standard deviation with n - 1; None for n < 2."""
        return mean_std(self.values)[1]

    @property
    def n_attempts(self) -> int:
        return len(self.observations)

    @property
    def failed(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if o.status == "failed")

    @property
    def nonfinite(self) -> tuple[Observation, ...]:
        return tuple(o for o in self.observations if o.nonfinite)

    @property
    def not_completed(self) -> tuple[Observation, ...]:
        """Every attempt that did not complete (failed, cancelled, running, unknown)."""
        return tuple(o for o in self.observations if o.status != "completed")

    @property
    def n_failed(self) -> int:
        return len(self.failed)

    @property
    def n_nonfinite(self) -> int:
        return len(self.nonfinite)

    @property
    def n_not_completed(self) -> int:
        return len(self.not_completed)

    def field(self, name: str) -> Any:
        """A pooling field's value by its name in ``POOL_FIELDS``."""
        return getattr(self, name)


@dataclass(frozen=True, slots=True)
class Summary:
    """The groups of one :func:`summarize` call, in order of first appearance."""

    groups: tuple[GroupSummary, ...]
    differing: tuple[str, ...]

    def pooled(self) -> GroupSummary:
        """The one group; PoolingError when the observations were stratified."""
        if len(self.groups) == 1:
            return self.groups[0]
        if not self.groups:
            raise PoolingError("no observations to pool")
        raise PoolingError(f"the observations form {len(self.groups)} groups that differ in "
                           f"{', '.join(self.differing)}; summarize each separately")

    def __iter__(self) -> Any:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)


def _checked(observations: Iterable[Observation]) -> list[Observation]:
    items = list(observations)
    seen: dict[tuple[str, str | None, str], int] = {}
    for i, item in enumerate(items):
        if not isinstance(item, Observation):
            raise TypeError(f"observations[{i}] must be an Observation; got "
                            f"{type(item).__name__}")
        key = (item.run_id, item.attempt_id, item.metric.name)
        if key in seen:
            raise DuplicateObservationError(
                f"observations[{seen[key]}] and [{i}] are both run {item.run_id} attempt "
                f"{item.attempt_id} for {item.metric.name!r}: one observation per attempt and "
                "metric; summarize each split or selection rule separately")
        seen[key] = i
    return items


def summarize(observations: Iterable[Observation]) -> Summary:
    """One :class:`GroupSummary` per poolable group (DuplicateObservationError for a
    second observation of one attempt and metric, before anything is grouped)."""
    items = _checked(observations)
    buckets: dict[tuple[Any, ...], list[Observation]] = {}
    for i, item in enumerate(items):
        key = item.pool_key()
        # An unknown configuration (an unknown lineage) pools with nothing, not even
        # another unknown one.
        buckets.setdefault(key if item.config is not None else (*key, i), []).append(item)
    keys = [bucket[0].pool_key() for bucket in buckets.values()]
    differing = tuple(name for j, name in enumerate(POOL_FIELDS)
                      if len({key[j] for key in keys}) > 1
                      or (name == "config" and len(keys) > 1 and None in {k[j] for k in keys}))
    groups = tuple(GroupSummary(**dict(zip(POOL_FIELDS, bucket[0].pool_key(), strict=True)),
                                observations=tuple(bucket), differing=differing)
                   for bucket in buckets.values())
    return Summary(groups, differing)
