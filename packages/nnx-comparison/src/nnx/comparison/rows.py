"""The report's plain-JSON rows: one per group, observation, comparison, pair and
unmatched replicate, in input order (spec §23). A non-finite value is written by name,
statistics too: finite values can still overflow a mean, a std or an interval."""

from __future__ import annotations

from typing import Any

from nnx.comparison.observation import Observation, encode_number
from nnx.comparison.pairing import PairedComparison
from nnx.comparison.summary import GroupSummary, Summary

__all__ = ["comparison_rows", "summary_rows"]


def _group_row(index: int, group: GroupSummary) -> dict[str, Any]:
    return {"row": "group", "group": index, "metric": group.metric.state(),
            "split": group.split, "selection": group.selection, "config": group.config,
            "data": group.data, "split_id": group.split_id, "n": group.n,
            "mean": encode_number(group.mean), "std": encode_number(group.std),
            "n_attempts": group.n_attempts,
            "n_failed": group.n_failed, "n_nonfinite": group.n_nonfinite,
            "n_not_completed": group.n_not_completed, "differing": list(group.differing)}


def _observation_row(index: int, obs: Observation) -> dict[str, Any]:
    return {"row": "observation", "group": index, "run_id": obs.run_id,
            "attempt_id": obs.attempt_id, "status": obs.status,
            "value": encode_number(obs.value), "counted": obs.counted,
            "selection": obs.selection, "split": obs.split, "replicate": obs.replicate,
            "evaluation": obs.evaluation}


def summary_rows(summary: Summary) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for index, group in enumerate(summary.groups):
        rows.append(_group_row(index, group))
        rows += [_observation_row(index, obs) for obs in group.observations]
    return rows


def _interval(comparison: PairedComparison) -> dict[str, Any] | None:
    if comparison.interval is None:
        return None
    state = comparison.interval.state()
    return {**state, "low": encode_number(state["low"]), "high": encode_number(state["high"])}


def comparison_rows(index: int, comparison: PairedComparison) -> list[dict[str, Any]]:
    head = {"row": "comparison", "comparison": index, "pairing": comparison.pairing,
            "metric": comparison.metric.state(), "a_config": comparison.a.config,
            "b_config": comparison.b.config, "delta": "b - a", "n": comparison.n,
            "mean": encode_number(comparison.mean), "std": encode_number(comparison.std),
            "n_nonfinite": comparison.n_nonfinite, "n_incomplete": comparison.n_incomplete,
            "interval": _interval(comparison)}
    rows = [head]
    rows += [{"row": "pair", "comparison": index, "replicate": p.replicate,
              "a_run_id": p.a.run_id, "a_attempt_id": p.a.attempt_id,
              "b_run_id": p.b.run_id, "b_attempt_id": p.b.attempt_id,
              "a_value": encode_number(p.a.value), "b_value": encode_number(p.b.value),
              "delta": encode_number(p.delta), "status": p.status} for p in comparison.pairs]
    rows += [{"row": "unmatched", "comparison": index, "replicate": u.replicate,
              "side": u.side, "run_id": u.observation.run_id,
              "attempt_id": u.observation.attempt_id} for u in comparison.unmatched]
    return rows
