"""plan_split: decide train / val / test membership explicitly (spec §13.3)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from nnx.data_splits._assign import assign
from nnx.data_splits._ids import (
    Key,
    SplitError,
    as_list,
    check_seed,
    id_kind,
    normalize_ids,
    sort_ids,
)
from nnx.data_splits._proportions import SPLITS
from nnx.data_splits.manifest import STRATEGIES, SplitManifest, as_identity

__all__ = ["plan_split"]


def plan_split(ids: Any = None, *, strategy: str, proportions: Any = None, groups: Any = None,
               times: Any = None, labels: Any = None, cutoffs: Any = None, gap: Any = None,
               seed: Any = None, source: Any = None, insufficient: str = "raise",
               members: Any = None) -> SplitManifest:
    """Plan which samples train, validate and test; return the :class:`SplitManifest`.

    ``ids`` are stable sample ids (str or int, one type); without them the plan
    records row positions and needs a ``source`` identity. Strategies:
    ``"group"`` (``groups=``, ``proportions=(train, val, test)``, ``seed=``),
    ``"chronological"`` (``times=``, ``cutoffs=(validation_start, test_start)``,
    ``gap=``; no seed), ``"stratified"`` (``labels=``, ``proportions=``,
    ``seed=``, ``insufficient="raise" | "train"``) and ``"explicit"``
    (``members={"train": [...], "val": [...], "test": [...]}``). ``seed=None``
    draws a seed from the OS and records it; no torch, NumPy or Python RNG is read.
    Every refusal is a :class:`SplitError`.
    """
    if strategy not in STRATEGIES:
        raise SplitError(f"strategy must be one of {', '.join(STRATEGIES)}; got {strategy!r}")
    _refuse_unused(strategy, proportions=proportions, groups=groups, times=times,
                   labels=labels, cutoffs=cutoffs, gap=gap, members=members,
                   insufficient=insufficient != "raise",
                   seed=seed is not None and strategy in ("chronological", "explicit"))
    identity = as_identity(source, "source")
    if strategy == "explicit":
        return _explicit(ids, members, identity)
    keys, kind = _ids(ids, strategy, groups=groups, times=times, labels=labels)
    if kind == "position":
        _require_source(identity)
    drawn = None if strategy == "chronological" else (
        int.from_bytes(os.urandom(8), "big") if seed is None else check_seed(seed))
    placed, excluded, parameters = assign(
        strategy, keys, proportions=proportions, groups=groups, times=times, labels=labels,
        cutoffs=cutoffs, gap=gap, seed=drawn, insufficient=insufficient)
    if not placed[0]:
        raise SplitError(f"the {strategy} plan leaves the train split empty "
                         f"({_sizes(placed, excluded)}); a plan needs a training row")
    return _manifest(strategy, kind, parameters, drawn, identity, placed, excluded)


def _refuse_unused(strategy: str, **given: Any) -> None:
    uses = {"group": {"proportions", "groups"},
            "chronological": {"times", "cutoffs", "gap"},
            "stratified": {"proportions", "labels", "insufficient"},
            "explicit": {"members"}}[strategy]
    unused = [name for name, value in given.items()
              if name not in uses and value is not None and value is not False]
    if unused:
        raise SplitError(f"the {strategy} strategy takes no {', '.join(unused)}")


def _ids(ids: Any, strategy: str, **values: Any) -> tuple[list[Key], str]:
    if ids is not None:
        return normalize_ids(ids)
    given = [v for v in values.values() if v is not None]
    if not given:
        raise SplitError(f"the {strategy} strategy needs ids (or, for a positional plan, "
                         "its groups / times / labels)")
    return list(range(len(as_list(given[0], strategy)))), "position"


def _require_source(identity: Any) -> None:
    if identity is None or identity.kind == "unknown":
        raise SplitError("a plan without ids records row positions, so it needs a source "
                         "identity (hash_file(...) or a declared name) to be replayed safely")


def _explicit(ids: Any, members: Any, identity: Any) -> SplitManifest:
    """A hand-built plan: the given memberships, checked against ``ids`` when given."""
    if not isinstance(members, Mapping) or not set(members) <= {*SPLITS, "excluded"}:
        raise SplitError("the explicit strategy needs members={'train': [...], 'val': [...], "
                         "'test': [...]} (and optionally 'excluded')")
    lists = [normalize_ids(members.get(s, []), f"members[{s!r}]")[0]
             for s in (*SPLITS, "excluded")]
    everything = [k for keys in lists for k in keys]
    kind = id_kind(everything)
    if kind is None:
        raise SplitError("members must hold ids of one type (str or int)")
    if ids is None:
        kind = "position"
        _require_source(identity)
    else:
        listed, given_kind = normalize_ids(ids)
        if given_kind != kind or set(listed) != set(everything):
            raise SplitError("members must cover exactly the given ids, once each")
    placed, excluded = lists[:3], lists[3]
    if not placed[0]:
        raise SplitError("the explicit plan leaves the train split empty")
    return _manifest("explicit", kind, {}, None, identity, placed, excluded)


def _sizes(placed: list[list[Key]], excluded: list[Key]) -> str:
    return ", ".join(f"{s}={len(p)}" for s, p in zip(SPLITS, placed, strict=True)) + (
        f", excluded={len(excluded)}")


def _manifest(strategy: str, kind: str, parameters: dict[str, Any], seed: int | None,
              identity: Any, placed: list[list[Key]], excluded: list[Key]) -> SplitManifest:
    return SplitManifest({
        "format": "nnx.split/1", "strategy": strategy, "id_kind": kind,
        "parameters": parameters, "seed": seed,
        "source": None if identity is None else identity.state(),
        "splits": {s: sort_ids(p) for s, p in zip(SPLITS, placed, strict=True)},
        "excluded": sort_ids(excluded),
    })
