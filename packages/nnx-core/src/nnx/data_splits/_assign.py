"""One dispatch from a strategy and its inputs to the memberships (plan and replay).

:func:`plan_split` and :meth:`SplitManifest.replay` both come here, so a replay
re-runs exactly the code that planned: the same ids with the same groups, times
or labels give the same splits whatever their row order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from nnx._foundation.hashing import plain
from nnx.data_splits._chronological import (
    assign_chronological,
    cutoffs_from_state,
    gap_from_state,
)
from nnx.data_splits._grouped import assign_groups
from nnx.data_splits._ids import Key, SplitError, as_keys, as_list
from nnx.data_splits._proportions import check_proportions
from nnx.data_splits._stratified import INSUFFICIENT, assign_stratified

__all__ = ["Placement", "assign", "recorded_inputs"]

#: (train, val, test) ids, the excluded ids, the parameters to record.
Placement = tuple[list[list[Key]], list[Key], dict[str, Any]]


def _values(values: Any, what: str, n: int, strategy: str) -> list[Any]:
    if values is None:
        raise SplitError(f"the {strategy} strategy needs {what}= (one per id)")
    listed = as_list(values, what)
    if len(listed) != n:
        raise SplitError(f"{what} has {len(listed)} values for {n} ids; give one per id")
    return listed


def _labels(values: list[Any]) -> list[Any]:
    try:
        return [plain(v, f"labels[{i}]") for i, v in enumerate(values)]
    except (TypeError, ValueError) as exc:
        raise SplitError(f"{exc} (a label is a str, int, float or bool)") from None


def assign(strategy: str, keys: Sequence[Key], *, proportions: Any, groups: Any, times: Any,
           labels: Any, cutoffs: Any, gap: Any, seed: int | None,
           insufficient: str) -> Placement:
    """The memberships of ``keys`` under ``strategy``; a SplitError for any bad input."""
    n = len(keys)
    if strategy == "chronological":
        return assign_chronological(keys, _values(times, "times", n, strategy), cutoffs, gap)
    given, exact = check_proportions(proportions)
    assert seed is not None  # group / stratified plans always have one
    if strategy == "group":
        placed = assign_groups(keys, as_keys(_values(groups, "groups", n, strategy), "groups"),
                               exact, seed)
        return placed, [], {"proportions": list(given)}
    if insufficient not in INSUFFICIENT:
        raise SplitError(f"insufficient must be 'raise' or 'train'; got {insufficient!r}")
    placed, train_only = assign_stratified(
        keys, _labels(_values(labels, "labels", n, strategy)), exact, seed, insufficient)
    parameters: dict[str, Any] = {"proportions": list(given), "insufficient": insufficient}
    if insufficient == "train":
        parameters["train_only_classes"] = train_only
    return placed, [], parameters


def recorded_inputs(strategy: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword inputs of :func:`assign` that a manifest's parameters record."""
    if strategy == "chronological":
        kind = parameters["time_kind"]
        return {"cutoffs": cutoffs_from_state(parameters["cutoffs"], kind),
                "gap": gap_from_state(parameters["gap"]), "proportions": None,
                "insufficient": "raise"}
    return {"proportions": parameters["proportions"], "cutoffs": None, "gap": None,
            "insufficient": parameters.get("insufficient", "raise")}
