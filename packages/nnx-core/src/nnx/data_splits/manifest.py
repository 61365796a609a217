"""SplitManifest: a split plan's memberships as JSON ``nnx.split/1`` (spec §13.3).

The document holds the strategy, its parameters, the seed, the source identity,
the sorted members of train / val / test and the excluded (gap) ids. Its
canonical bytes (the project's one canonical JSON) decide equality, and
``digest()`` is their SHA-256. Every refusal, on load or on replay, is a
:class:`SplitError` raised before anything is built from the plan.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

from nnx._foundation.atomic import atomic_write_text
from nnx._foundation.bounded import load_json
from nnx._foundation.hashing import canonical_bytes, frozen_plain, plain, sha256_hex
from nnx.data_splits._assign import assign, recorded_inputs
from nnx.data_splits._ids import ID_KINDS, Key, SplitError, id_kind, normalize_ids, sort_ids
from nnx.data_splits._proportions import SPLITS
from nnx.datasets._split import SplitIndices
from nnx.provenance.identity import IdentityRef, declared

__all__ = ["FORMAT", "STRATEGIES", "SplitManifest", "as_identity"]

FORMAT = "nnx.split/1"
STRATEGIES = ("group", "chronological", "stratified", "explicit")
_KEYS = frozenset({"format", "strategy", "id_kind", "parameters", "seed", "source", "splits",
                   "excluded"})
#: Split files list every id: allow more than the runs root's small-document bound.
_MAX_BYTES = 1 << 28


def as_identity(value: Any, what: str) -> IdentityRef | None:
    """``None``, a declared name (str) or an :class:`IdentityRef`."""
    if value is None or isinstance(value, IdentityRef):
        return value
    if isinstance(value, str) and value:
        return declared(value)
    raise SplitError(f"{what} must be an IdentityRef (hash_file / declared), a non-empty "
                     f"name, or None; got {value!r}")


class SplitManifest:
    """Which sample ids train, validate and test; immutable, compared by canonical bytes."""

    __slots__ = ("_bytes", "_document")

    _document: Any
    _bytes: bytes

    def __init__(self, document: Mapping[str, Any]) -> None:
        doc = _checked_document(document)
        object.__setattr__(self, "_document", frozen_plain(doc))
        object.__setattr__(self, "_bytes", canonical_bytes(doc))

    # -- the fields -------------------------------------------------------------------
    @property
    def strategy(self) -> str:
        return str(self._document["strategy"])

    @property
    def id_kind(self) -> str:
        """``"str"`` / ``"int"`` sample ids, or ``"position"`` for a positional plan."""
        return str(self._document["id_kind"])

    @property
    def parameters(self) -> Mapping[str, Any]:
        return MappingProxyType(plain(self._document["parameters"]))

    @property
    def seed(self) -> int | None:
        seed = self._document["seed"]
        return None if seed is None else int(seed)

    @property
    def source(self) -> IdentityRef | None:
        state = self._document["source"]
        return None if state is None else IdentityRef.from_state(state)

    @property
    def train(self) -> tuple[Key, ...]:
        return tuple(self._document["splits"]["train"])

    @property
    def val(self) -> tuple[Key, ...]:
        return tuple(self._document["splits"]["val"])

    @property
    def test(self) -> tuple[Key, ...]:
        return tuple(self._document["splits"]["test"])

    @property
    def excluded(self) -> tuple[Key, ...]:
        """Gap rows: in no split and no loader, never admitted or counted."""
        return tuple(self._document["excluded"])

    # -- identity and JSON ------------------------------------------------------------
    def document(self) -> dict[str, Any]:
        result: dict[str, Any] = plain(self._document)
        return result

    def canonical_bytes(self) -> bytes:
        return self._bytes

    def digest(self) -> str:
        """SHA-256 of the canonical document: memberships, strategy, parameters, seed, source."""
        return sha256_hex(self._bytes)

    def to_json(self) -> str:
        return json.dumps(self.document(), sort_keys=True, indent=1, ensure_ascii=False,
                          allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> SplitManifest:
        try:
            document = load_json(data=text, where="split JSON", max_bytes=_MAX_BYTES,
                                 parse_constant=_no_constant)
        except ValueError as exc:
            raise SplitError(str(exc)) from None
        return cls(document)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the manifest atomically (the previous file survives an interrupted write)."""
        return atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SplitManifest:
        try:
            document = load_json(path, max_bytes=_MAX_BYTES, parse_constant=_no_constant)
        except ValueError as exc:
            raise SplitError(str(exc)) from None
        return cls(document)

    # -- replay -----------------------------------------------------------------------
    def check_source(self, source_identity: Any) -> None:
        """Refuse a source whose identity differs from the recorded one (or can't be checked)."""
        given = as_identity(source_identity, "source_identity")
        recorded = self.source
        checkable = recorded is not None and recorded.kind != "unknown"
        shown = None if recorded is None else recorded.state()
        if self.id_kind == "position" and not checkable:
            raise SplitError("this positional plan records no source identity, so its row "
                             "positions cannot be matched to any source")
        if given is None:
            if checkable:
                raise SplitError(f"this plan is bound to the source {shown}; pass "
                                 "the same identity as source_identity")
            return
        if not checkable:
            raise SplitError("source_identity was given, but this plan records no source "
                             "identity to check it against")
        if given != recorded:
            raise SplitError(f"the source changed: the plan was made for {shown}, "
                             f"got {given.state()}")

    def resolve(self, ids: Any, *, source_identity: Any = None) -> SplitIndices:
        """Row positions of each split in a source whose rows carry ``ids`` (in row order).

        A positional plan takes the source's row count instead. Duplicate, missing
        or unexpected ids, ids of another type and a changed source identity raise
        :class:`SplitError`; excluded ids may be present (in no split) or absent.
        """
        self.check_source(source_identity)
        if self.id_kind == "position":
            return self._resolve_positions(ids)
        keys, kind = normalize_ids(ids, "ids")
        if keys and kind != self.id_kind:
            raise SplitError(f"the plan's ids are {self.id_kind}s, the source's are {kind}s")
        where = self._where()
        rows: list[list[int]] = [[], [], []]
        unexpected = [k for k in keys if k not in where]
        if unexpected:
            raise SplitError(f"{len(unexpected)} id(s) of the source are not in the plan "
                             f"(first {unexpected[0]!r})")
        for row, key in enumerate(keys):
            if where[key] >= 0:
                rows[where[key]].append(row)
        present = set(keys)
        missing = [k for k in where if where[k] >= 0 and k not in present]
        if missing:
            raise SplitError(f"{len(missing)} planned id(s) are missing from the source "
                             f"(first {missing[0]!r})")
        return SplitIndices(*(tuple(r) for r in rows))

    def _resolve_positions(self, n: Any) -> SplitIndices:
        total = sum([len(self._document["splits"][s]) for s in SPLITS]) + len(self.excluded)
        if isinstance(n, bool) or not isinstance(n, int):
            raise SplitError(f"a positional plan resolves against a row count; got {n!r}")
        if n != total or any(int(p) >= n for p in (*self.train, *self.val, *self.test)):
            raise SplitError(f"this positional plan covers {total} rows; the source has {n}")
        return SplitIndices(self.train, self.val, self.test)  # type: ignore[arg-type]

    def _where(self) -> dict[Key, int]:
        """Each planned id's split index (-1 for excluded)."""
        where: dict[Key, int] = {k: -1 for k in self.excluded}
        for index, name in enumerate(SPLITS):
            where.update((k, index) for k in self._document["splits"][name])
        return where

    def replay(self, ids: Any, *, source_identity: Any = None, groups: Any = None,
               times: Any = None, labels: Any = None) -> SplitManifest:
        """Plan again from ``ids`` and their groups / times / labels with the recorded
        strategy, parameters and seed; the plan itself when the result is the same.

        Rows in another order replay into the same splits. A source whose values no
        longer give these memberships (or a failing :meth:`resolve`) raises
        :class:`SplitError`. An explicit plan has nothing to re-plan: it is resolved.
        """
        self.resolve(ids, source_identity=source_identity)
        if self.strategy == "explicit":
            return self
        keys = list(range(ids)) if self.id_kind == "position" else normalize_ids(ids)[0]
        try:
            inputs = recorded_inputs(self.strategy, self._document["parameters"])
        except (KeyError, TypeError, ValueError) as exc:
            raise SplitError(f"the manifest's parameters cannot be replayed ({exc!r})") from None
        placed, excluded, _ = assign(self.strategy, keys, groups=groups, times=times,
                                     labels=labels, seed=self.seed, **inputs)
        same = all(sort_ids(placed[k]) == list(self._document["splits"][name])
                   for k, name in enumerate(SPLITS))
        if not same or not set(excluded) <= set(self.excluded):
            raise SplitError("the source's values no longer give this plan's splits; "
                             "re-plan with plan_split if the data changed on purpose")
        return self

    # -- value semantics --------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SplitManifest):
            return NotImplemented
        return self._bytes == other._bytes

    def __hash__(self) -> int:
        return hash(self._bytes)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"SplitManifest is immutable; cannot set {name!r}")

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return (SplitManifest, (self.document(),))

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={len(self._document['splits'][s])}" for s in SPLITS)
        return (f"SplitManifest(strategy={self.strategy!r}, {sizes}, "
                f"excluded={len(self.excluded)}, digest={self.digest()[:12]}…)")


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} in split JSON")


def _checked_document(document: Any) -> dict[str, Any]:
    """The document validated: format, fields, sorted disjoint members, a non-empty train."""
    if not isinstance(document, Mapping):
        raise SplitError(f"a split manifest is a mapping; got {type(document).__name__}")
    if document.get("format") != FORMAT:
        raise SplitError(f"split format must be {FORMAT!r}; got {document.get('format')!r}")
    if set(document) != _KEYS:
        raise SplitError(f"a split manifest has exactly the fields {sorted(_KEYS)}; got "
                         f"{sorted(document)}")
    if document["strategy"] not in STRATEGIES:
        raise SplitError(f"strategy must be one of {', '.join(STRATEGIES)}; "
                         f"got {document['strategy']!r}")
    kind = document["id_kind"]
    if kind not in ID_KINDS:
        raise SplitError(f"id_kind must be one of {', '.join(ID_KINDS)}; got {kind!r}")
    seed = document["seed"]
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise SplitError(f"seed must be a non-negative integer or null; got {seed!r}")
    if not isinstance(document["parameters"], Mapping):
        raise SplitError("parameters must be a mapping")
    try:
        source = document["source"]
        source = None if source is None else IdentityRef.from_state(source).state()
        parameters = plain(document["parameters"], "parameters")
    except (TypeError, ValueError) as exc:
        raise SplitError(str(exc)) from None
    splits = document["splits"]
    if not isinstance(splits, Mapping) or set(splits) != set(SPLITS):
        raise SplitError(f"splits must map exactly {', '.join(SPLITS)} to id lists")
    members = {s: _members(splits[s], f"splits.{s}", kind) for s in SPLITS}
    excluded = _members(document["excluded"], "excluded", kind)
    if not members["train"]:
        raise SplitError("the train split is empty; a plan needs at least one training row")
    seen: set[Key] = set()
    for name, keys in (*members.items(), ("excluded", excluded)):
        clash = seen.intersection(keys)
        if clash:
            raise SplitError(f"id {sorted(clash)[0]!r} is in more than one split ({name})")
        seen.update(keys)
    return {"format": FORMAT, "strategy": document["strategy"], "id_kind": kind,
            "parameters": parameters, "seed": seed, "source": source, "splits": members,
            "excluded": excluded}


def _members(values: Any, what: str, kind: str) -> list[Key]:
    if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
        raise SplitError(f"{what} must be a list of ids")
    keys, _ = normalize_ids(values, what) if values else ([], kind)
    found = id_kind(keys)
    expected = "int" if kind == "position" else kind
    if keys and found != expected:
        raise SplitError(f"{what} holds ids that are not all {expected}s")
    if kind == "position" and any(k < 0 for k in keys):  # type: ignore[operator]
        raise SplitError(f"{what} holds a negative row position")
    if list(keys) != sort_ids(keys):
        raise SplitError(f"{what} must be sorted")
    return list(keys)
