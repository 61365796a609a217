"""Ratios with their spread, and the machine's load: what every bench script prints.

A ratio is the median of per-round ratios (its contenders ran back to back in that
round, so a shared machine's drift between rounds cancels); the lowest and highest
per-round ratio say how far one round can land from it. The load average next to a
figure says how busy the machine was while it was measured.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["interleaved", "load", "paired_ratio", "ratio_text"]


def paired_ratio(numerators: Sequence[float], denominators: Sequence[float]
                 ) -> tuple[float, float, float]:
    """(median, min, max) of the per-round ratios ``numerators[i] / denominators[i]``."""
    ratios = [a / b for a, b in zip(numerators, denominators, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def ratio_text(numerators: Sequence[float], denominators: Sequence[float]) -> str:
    """``1.034 (0.98–1.10)``: the median per-round ratio and its min–max."""
    median, low, high = paired_ratio(numerators, denominators)
    return f"{median:.3f} ({low:.2f}–{high:.2f})"


def load() -> str:
    """The 1 / 5 / 15-minute load averages, or "n/a" where the platform has none."""
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except (OSError, AttributeError):
        return "n/a"


def interleaved(contenders: Mapping[str, Callable[[], Any]],
                repeats: int) -> dict[str, list[float]]:
    """Each contender's wall time (seconds) per round, ``repeats`` rounds; the order
    alternates round by round, so neither side always runs on the other's warm caches."""
    names = list(contenders)
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(repeats):
        order = names if i % 2 == 0 else names[::-1]
        for name in order:
            start = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - start)
    return times
