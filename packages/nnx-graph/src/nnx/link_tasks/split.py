"""``LinkSplit``, the edge split's manifest ``nnx.link-split/1``, and ``split_links`` (also
spelled ``plan_link_split``), which derives one from a graph (spec §26 "The manifest").

A split holds the canonical train / validation / test positives (undirected: ``(min,
max)``), the fixed validation / test negatives, and the policy that produced them:
directedness, the self-loop policy, the seed, the training negatives per positive and the
topology policy (which edges pass messages). An explicit ``LinkSplit(...)`` is checked as
strictly as a derived one: a non-canonical, repeated or cross-split edge, a barred
self-loop, or a negative that is a positive of any split is refused
(:class:`LinkSplitError`).

Every candidate of the manifest has an id: the train positives first, then the validation
positives, the test positives, the validation negatives and the test negatives
(:meth:`LinkSplit.candidates`). A training pass's re-drawn negatives take the ids after
those (``fixed_count + j``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from nnx.extend import (
    atomic_write_text,
    canonical_bytes,
    check_choice,
    check_count,
    check_seed,
    load_json,
    sha256_hex,
)
from nnx.link_tasks.derive import derive_split
from nnx.link_tasks.edges import check_edge_index, keys, reversed_pairs
from nnx.link_tasks.errors import LinkReplayError, LinkSplitError
from nnx.link_tasks.negatives import check_capacity

__all__ = ["FORMAT", "ROLES", "LinkSplit", "plan_link_split", "split_links"]

FORMAT = "nnx.link-split/1"
#: The candidate roles, in id order.
ROLES = ("train", "val", "test")
_NAMES = {"train": "training", "val": "validation", "test": "test"}


def _long(value: Any) -> torch.Tensor:
    # A tensor is checked as it is (a float one is refused); nested lists become int64.
    out = value if isinstance(value, torch.Tensor) else torch.as_tensor(value, dtype=torch.long)
    return out.reshape(2, 0) if out.numel() == 0 else out  # [] or [[], []]: no edges


class LinkSplit:
    """One checked edge split; build it with :func:`nnx.link_tasks.split_links` or
    explicitly (every rule checked). ``categories`` (with ``labels``, one category index
    per positive of each split) makes an edge-label split, whose ``label_existence``
    ("hidden" or "visible") says whether labelled validation / test edges pass
    messages; an edge-label split has no negatives."""

    def __init__(self, *, n: int, train: Any, val: Any, test: Any,
                 val_negatives: Any = None, test_negatives: Any = None,
                 directed: bool = False, self_loops: str = "barred", seed: int = 0,
                 negatives: int | None = None, categories: Sequence[str] | None = None,
                 labels: Mapping[str, Any] | None = None, label_existence: str | None = None,
                 request: Mapping[str, Any] | None = None) -> None:
        self.n = check_count("LinkSplit.n", n)
        if not isinstance(directed, bool):
            raise LinkSplitError(f"LinkSplit.directed must be a bool; got {directed!r}")
        self.directed = directed
        self.self_loops = check_choice("LinkSplit.self_loops", self_loops, ("barred", "allowed"))
        self.seed = check_seed("LinkSplit.seed", seed)
        self.positives = {role: check_edge_index(_long(edges), self.n,
                                                 f"the {_NAMES[role]} positives")
                          for role, edges in zip(ROLES, (train, val, test), strict=True)}
        empty = torch.empty(2, 0, dtype=torch.long)
        self.fixed_negatives = {
            role: check_edge_index(empty if edges is None else _long(edges), self.n,
                                   f"the {_NAMES[role]} negatives")
            for role, edges in (("val", val_negatives), ("test", test_negatives))}
        self.categories = None if categories is None else self._categories(categories)
        self.labels = self._labels(labels)
        self.label_existence = self._existence(label_existence)
        default = 0 if self.categories is not None else 1
        self.negatives = check_count("LinkSplit.negatives",
                                     default if negatives is None else negatives, minimum=0)
        self.request = None if request is None else dict(request)
        self._check_edges()
        self._check_negatives()
        self._message: torch.Tensor | None = None
        self._table: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None

    # -- declarations ------------------------------------------------------------------
    @staticmethod
    def _categories(categories: Sequence[str]) -> tuple[str, ...]:
        if isinstance(categories, str) or not isinstance(categories, Sequence) or \
                not categories or not all(isinstance(c, str) and c for c in categories) or \
                len(set(categories)) != len(categories):
            raise LinkSplitError("LinkSplit.categories must be a non-empty sequence of distinct "
                                 f"names, in declared order; got {categories!r}")
        return tuple(categories)

    def _labels(self, labels: Mapping[str, Any] | None) -> dict[str, torch.Tensor] | None:
        if self.categories is None:
            if labels is not None:
                raise LinkSplitError("LinkSplit.labels needs categories= (an edge-label split)")
            return None
        if not isinstance(labels, Mapping) or set(labels) != set(ROLES):
            raise LinkSplitError("an edge-label split needs labels={'train': ..., 'val': ..., "
                                 "'test': ...}, one category index per positive")
        out = {}
        for role in ROLES:
            value = torch.as_tensor(labels[role])
            count = self.positives[role].shape[1]
            if value.is_floating_point() or value.dtype == torch.bool or \
                    value.shape != (count,):
                raise LinkSplitError(f"the {_NAMES[role]} labels must be {count} integer "
                                     f"category indices; got shape {tuple(value.shape)}")
            value = value.to(torch.long)
            if value.numel() and (int(value.min()) < 0 or
                                  int(value.max()) >= len(self.categories)):
                raise LinkSplitError(f"the {_NAMES[role]} labels must index categories "
                                     f"[0, {len(self.categories)})")
            out[role] = value
        return out

    def _existence(self, label_existence: str | None) -> str | None:
        if self.categories is None:
            if label_existence is not None:
                raise LinkSplitError("label_existence belongs to an edge-label split "
                                     "(categories=)")
            return None
        return check_choice("LinkSplit.label_existence",
                            "hidden" if label_existence is None else label_existence,
                            ("hidden", "visible"))

    # -- the rules ---------------------------------------------------------------------
    def _edge_rules(self, edges: torch.Tensor, what: str) -> None:
        if not self.directed and bool((edges[0] > edges[1]).any()):
            col = int(torch.nonzero(edges[0] > edges[1])[0])
            raise LinkSplitError(f"{what} hold the non-canonical edge ({int(edges[0, col])}, "
                                 f"{int(edges[1, col])}): an undirected split stores (min, max)")
        if self.self_loops == "barred" and bool((edges[0] == edges[1]).any()):
            col = int(torch.nonzero(edges[0] == edges[1])[0])
            raise LinkSplitError(f"{what} hold the self-loop ({int(edges[0, col])}, "
                                 f"{int(edges[1, col])}), barred by self_loops='barred'")

    def _repeats(self, groups: Sequence[tuple[str, torch.Tensor]]) -> None:
        """Refuse a key listed twice within or across ``groups``, naming both places."""
        key = torch.cat([keys(edges, self.n) for _, edges in groups])
        owner = torch.cat([torch.full((edges.shape[1],), i, dtype=torch.long)
                           for i, (_, edges) in enumerate(groups)])
        unique, counts = torch.unique(key, return_counts=True)
        if bool((counts > 1).any()):
            bad = unique[counts > 1][0]
            where = [groups[int(i)][0] for i in owner[key == bad]]
            u, v = int(bad) // self.n, int(bad) % self.n
            place = (f"repeated in {where[0]}" if where[0] == where[1]
                     else f"in both {where[0]} and {where[1]}")
            kind = "edge" if self.directed else "edge (or its reverse)"
            raise LinkSplitError(f"the {kind} ({u}, {v}) is {place}: a split holds each "
                                 "pair once")

    def _check_edges(self) -> None:
        for role, edges in self.positives.items():
            self._edge_rules(edges, f"the {_NAMES[role]} positives")
        self._repeats([(f"the {_NAMES[r]} positives", e) for r, e in self.positives.items()])

    def _check_negatives(self) -> None:
        fixed = sum(e.shape[1] for e in self.fixed_negatives.values())
        if self.categories is not None and (fixed or self.negatives):
            raise LinkSplitError("an edge-label split samples no negatives: a non-edge is "
                                 "never a category")
        for role, edges in self.fixed_negatives.items():
            self._edge_rules(edges, f"the {_NAMES[role]} negatives")
        self._repeats([*((f"the {_NAMES[r]} positives", e) for r, e in self.positives.items()),
                       *((f"the {_NAMES[r]} negatives", e)
                         for r, e in self.fixed_negatives.items())])
        check_capacity(self.negatives * self.positives["train"].shape[1], n=self.n,
                       directed=self.directed, self_loops=self.self_loops,
                       excluded=self.positive_keys().numel() + fixed,
                       what="the training negatives")

    # -- what the task reads -------------------------------------------------------------
    @property
    def mode(self) -> str:
        """``"binary"`` (edge or not) or ``"edge_label"`` (one category per edge)."""
        return "binary" if self.categories is None else "edge_label"

    @property
    def topology(self) -> str:
        """The topology policy: ``"train"`` or ``"train+labelled"`` (visible labels)."""
        return "train+labelled" if self.label_existence == "visible" else "train"

    def positive_keys(self) -> torch.Tensor:
        """The keys of every positive of every split."""
        return torch.cat([keys(e, self.n) for e in self.positives.values()])

    def fixed_negative_keys(self) -> torch.Tensor:
        return torch.cat([keys(e, self.n) for e in self.fixed_negatives.values()])

    def message_edge_index(self) -> torch.Tensor:
        """The only message graph, for every split: the training positives (and, with
        ``label_existence="visible"``, the labelled validation / test edges), plus their
        reverses when undirected; (2, M), sorted by (source, target)."""
        if self._message is None:
            roles = ROLES if self.topology == "train+labelled" else ("train",)
            edges = torch.cat([self.positives[r] for r in roles], dim=1)
            if not self.directed:
                edges = torch.cat([edges, reversed_pairs(edges)], dim=1)
            order = torch.argsort(keys(edges, self.n))
            self._message = edges[:, order]
        return self._message.clone()

    @property
    def fixed_count(self) -> int:
        """How many candidates the manifest fixes (training negatives' ids start here)."""
        return sum(e.shape[1] for e in self.positives.values()) + \
            sum(e.shape[1] for e in self.fixed_negatives.values())

    def candidates(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every fixed candidate in id order: pairs (2, F), targets (F,) (1 / 0, or the
        category index) and roles (F,) (an index into :data:`ROLES`)."""
        if self._table is None:
            parts, targets, roles = [], [], []
            for role in ROLES:
                edges = self.positives[role]
                parts.append(edges)
                targets.append(self.labels[role] if self.labels is not None
                               else torch.ones(edges.shape[1], dtype=torch.long))
                roles.append(torch.full((edges.shape[1],), ROLES.index(role), dtype=torch.long))
            for role, edges in self.fixed_negatives.items():
                parts.append(edges)
                targets.append(torch.zeros(edges.shape[1], dtype=torch.long))
                roles.append(torch.full((edges.shape[1],), ROLES.index(role), dtype=torch.long))
            self._table = (torch.cat(parts, dim=1), torch.cat(targets), torch.cat(roles))
        return self._table

    def candidate_ids(self, role: str) -> torch.Tensor:
        """The ids of ``role``'s fixed candidates, positives first, in id order."""
        check_choice("role", role, ROLES)
        return torch.nonzero(self.candidates()[2] == ROLES.index(role)).reshape(-1)

    # -- the manifest --------------------------------------------------------------------
    def manifest(self) -> dict[str, Any]:
        """The split as plain data (``format`` ``nnx.link-split/1``)."""
        return {
            "format": FORMAT, "n": self.n, "directed": self.directed,
            "self_loops": self.self_loops, "seed": self.seed, "negatives": self.negatives,
            "topology": self.topology, "categories": None if self.categories is None
            else list(self.categories), "label_existence": self.label_existence,
            "positives": {r: e.tolist() for r, e in self.positives.items()},
            "labels": None if self.labels is None
            else {r: v.tolist() for r, v in self.labels.items()},
            "fixed_negatives": {r: e.tolist() for r, e in self.fixed_negatives.items()},
            "request": self.request,
        }

    @property
    def digest(self) -> str:
        """SHA-256 of the manifest's canonical encoding: the split's identity."""
        return sha256_hex(canonical_bytes(self.manifest()))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LinkSplit) and self.digest == other.digest

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        counts = ", ".join(f"{r}={e.shape[1]}" for r, e in self.positives.items())
        return (f"LinkSplit(n={self.n}, {counts}, directed={self.directed}, "
                f"self_loops={self.self_loops!r}, seed={self.seed}, mode={self.mode!r})")

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, Any]) -> LinkSplit:
        """The split a manifest describes, every rule checked again."""
        if not isinstance(manifest, Mapping) or manifest.get("format") != FORMAT:
            found = manifest.get("format") if isinstance(manifest, Mapping) else manifest
            raise LinkSplitError(f"not a {FORMAT} manifest (format {found!r})")
        try:
            split = cls(n=manifest["n"], train=manifest["positives"]["train"],
                        val=manifest["positives"]["val"], test=manifest["positives"]["test"],
                        val_negatives=manifest["fixed_negatives"]["val"],
                        test_negatives=manifest["fixed_negatives"]["test"],
                        directed=manifest["directed"], self_loops=manifest["self_loops"],
                        seed=manifest["seed"], negatives=manifest["negatives"],
                        categories=manifest["categories"], labels=manifest["labels"],
                        label_existence=manifest["label_existence"],
                        request=manifest["request"])
        except (KeyError, TypeError) as exc:
            raise LinkSplitError(f"the {FORMAT} manifest is incomplete: {exc!r}") from exc
        if split.topology != manifest.get("topology"):
            raise LinkSplitError(f"the manifest records topology {manifest.get('topology')!r}; "
                                 f"its declarations give {split.topology!r}")
        return split

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the manifest as JSON, atomically (core's one atomic writer)."""
        atomic_write_text(path, canonical_bytes(self.manifest()).decode("utf-8"))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LinkSplit:
        """The split saved at ``path`` (core's bounded JSON reader, every rule checked)."""
        return cls.from_manifest(load_json(path, strict=True))

    def replay(self, edge_index: torch.Tensor, labels: Any = None) -> LinkSplit:
        """Re-derive the split from ``edge_index`` (and ``labels``) with the recorded
        request and seed (a local generator); refuse a mismatch (:class:`LinkReplayError`)."""
        if self.request is None:
            raise LinkReplayError("this LinkSplit was built explicitly, not by split_links: "
                                  "it records no request to replay")
        again = split_links(edge_index, self.n, val=self.request["val"],
                            test=self.request["test"], seed=self.seed, directed=self.directed,
                            self_loops=self.self_loops, negatives=self.negatives,
                            categories=self.categories, labels=labels,
                            label_existence=self.label_existence)
        if again.digest != self.digest:
            mine, theirs = self.manifest(), again.manifest()
            differ = sorted(k for k in mine if mine[k] != theirs[k])
            raise LinkReplayError(f"replaying the split on these edges gives another manifest "
                                  f"(it differs in {', '.join(differ)}): not the graph it was "
                                  "derived from")
        return again


def split_links(edge_index: torch.Tensor, n: int, *, val: float = 0.1, test: float = 0.1,
                seed: int = 0, directed: bool = False, self_loops: str = "barred",
                negatives: int | None = None, categories: Sequence[str] | None = None,
                labels: Any = None, label_existence: str | None = None) -> LinkSplit:
    """Split the edges of an ``n``-node graph (spec §26). Edges are canonicalised
    (undirected: ``(min, max)``) and de-duplicated first, barred self-loops dropped; then
    fractions ``val`` and ``test`` of the unique edges (rounded down) are held out and the
    rest train, permuted by a local generator seeded from ``seed``. ``negatives`` per
    positive (default 1) are fixed for validation and test (drawn from the static
    complement here) and re-drawn for training each epoch; a request beyond the complement
    fails before sampling (:class:`LinkCapacityError`). An edge-label split
    (``categories=``, with ``labels=``: one category index per edge) samples none, and
    declares ``label_existence`` ("hidden" or "visible")."""
    return LinkSplit(**derive_split(edge_index, n, val=val, test=test, seed=seed,
                                    directed=directed, self_loops=self_loops,
                                    negatives=negatives, categories=categories, labels=labels,
                                    label_existence=label_existence))


#: The issue's name for :func:`split_links`: one function under two names, so
#: ``plan_link_split(...)`` and ``split_links(...)`` derive the same split.
plan_link_split = split_links
