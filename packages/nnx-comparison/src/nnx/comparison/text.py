"""The report's concise text view: every run and attempt id, status, selection rule and
signed delta, in input order; attempts that did not complete counted as not_completed."""

from __future__ import annotations

from nnx.comparison.observation import Observation
from nnx.comparison.pairing import PairedComparison
from nnx.comparison.summary import GroupSummary

__all__ = ["render_text"]


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.6g}"


def _group(index: int, group: GroupSummary) -> list[str]:
    metric = group.metric
    head = (f"group {index}: {metric.name} ({metric.direction}) split={group.split} "
            f"selection={group.selection} config={group.config}")
    if group.differing:
        head += f" [differs in {', '.join(group.differing)}]"
    stats = (f"  n={group.n} mean={_num(group.mean)} std={_num(group.std)} "
             f"attempts={group.n_attempts} not_completed={group.n_not_completed} "
             f"failed={group.n_failed} nonfinite={group.n_nonfinite}")
    return [head, stats, *(f"    {_observation(o)}" for o in group.observations)]


def _observation(obs: Observation) -> str:
    return (f"run {obs.run_id} attempt {obs.attempt_id or '-'} {obs.status} "
            f"{obs.replicate or '-'} {obs.selection or '-'} value={_num(obs.value)}")


def _comparison(index: int, comparison: PairedComparison) -> list[str]:
    lower = "lower" if comparison.metric.direction == "min" else "higher"
    head = (f"comparison {index}: {comparison.metric.name} B - A (B {lower} is better; "
            f"pairing: {comparison.pairing})")
    stats = (f"  n={comparison.n} mean={_signed(comparison.mean)} std={_num(comparison.std)} "
             f"incomplete={comparison.n_incomplete} nonfinite={comparison.n_nonfinite}")
    if comparison.interval is not None:
        iv = comparison.interval
        stats += (f" {iv.level:.0%} {iv.method} bootstrap [{_signed(iv.low)}, "
                  f"{_signed(iv.high)}] seed={iv.seed} resamples={iv.resamples}")
    lines = [head, stats]
    for p in comparison.pairs:
        lines.append(f"    {p.replicate}: A run {p.a.run_id} attempt {p.a.attempt_id or '-'} "
                     f"{p.a.status}, B run {p.b.run_id} attempt {p.b.attempt_id or '-'} "
                     f"{p.b.status}, delta={_signed(p.delta)} ({p.status})")
    for u in comparison.unmatched:
        lines.append(f"    {u.replicate}: unmatched, only on side {u.side.upper()} (run "
                     f"{u.observation.run_id} attempt {u.observation.attempt_id or '-'})")
    return lines


def render_text(groups: tuple[GroupSummary, ...],
                comparisons: tuple[PairedComparison, ...]) -> str:
    lines: list[str] = []
    for index, group in enumerate(groups):
        lines += _group(index, group)
    for index, comparison in enumerate(comparisons):
        lines += _comparison(index, comparison)
    return "\n".join(lines)
