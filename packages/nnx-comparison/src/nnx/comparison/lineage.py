"""The configuration identity of a run, its lineage included (spec §23).

A run with a parent (a continuation, a fine-tune, a born-again generation) replaces the
parent's id with the parent's own identity, followed back through every ancestor (each
followed parent with the data and split identities its own provenance declares), with
the data and split identities the child's provenance declares, the checkpoint tag (run.yaml) and
the resume mode (metadata.yaml). A parent is followed when its current attempt is the one
the child recorded; with no attempt recorded, when it had completed before the child
started; without provenance, when the child recorded the epoch it resumed at. Otherwise
the parent is named by the checkpoint the child recorded, or by its attempt and start
epoch, and only siblings of it pool; with no record the lineage is unknown (None) and
pools with nothing. Only runs trained with provenance= record a lineage.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from nnx.comparison.config_identity import digest
from nnx.comparison.document import RunFiles, RunReader
from nnx.comparison.errors import LineageError
from nnx.extend import AttemptRecord

__all__ = ["MAX_ANCESTORS", "Lineage"]

MAX_ANCESTORS = 64
_MOVING = ("last", "best")  # tags whose epoch is an outcome of the parent's training


def _instant(text: str | None) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text) if isinstance(text, str) else None
    except ValueError:
        return None
    return moment if moment is not None and moment.tzinfo is not None else None


def _completed_before(parent: AttemptRecord | None, child: AttemptRecord) -> bool:
    """The parent's attempt had completed before the child started (instants compared;
    an unknown order is not "before")."""
    if parent is None or parent.status != "completed":
        return False
    done, start = _instant(parent.finished_at), _instant(child.started_at)
    return done is not None and start is not None and done <= start


class Lineage:
    """Configuration identities of runs under one reader, each computed once."""

    def __init__(self, reader: RunReader) -> None:
        self.reader = reader
        self._known: dict[str, str | None] = {}
        self._depth: dict[str, int] = {}  # ancestors followed behind a known identity

    def identity(self, run: RunFiles) -> str | None:
        return self._identity(run, ())

    def _identity(self, run: RunFiles, below: tuple[str, ...]) -> str | None:
        if run.run_id in self._known:
            return self._known[run.run_id]
        parent_id = run.document.parent_run_id
        if parent_id is None:
            found: str | None = digest({"config": run.document.identity_config()})
        else:
            found = self._descended(run, parent_id, below)
        self._known[run.run_id] = found
        self._depth.setdefault(run.run_id, 0)
        return found

    def _descended(self, run: RunFiles, parent_id: str, below: tuple[str, ...]) -> str | None:
        attempt = run.attempt
        if attempt is None:
            return None  # lineages are recorded only for runs trained with provenance=
        chain = (*below, run.run_id)
        if parent_id in chain:
            raise LineageError(f"run {chain[0]}: its parents form a cycle "
                               f"({' -> '.join((*chain, parent_id))})")
        if len(chain) > MAX_ANCESTORS:
            raise LineageError(f"run {chain[0]}: more than {MAX_ANCESTORS} ancestors; "
                               "refusing to follow them further")
        parent = self._parent(chain[0], parent_id)
        link: Mapping[str, Any] = attempt.parent or {}
        ref = None if parent is None else self._followed(run, attempt, link, parent, chain)
        if ref is None:
            ref = _named(parent_id, link, run.document.source_checkpoint_id)
        if ref is None:
            return None
        data, splits = _declared(run)
        return digest({"config": run.document.identity_config(), "parent": ref,
                       "data": data, "splits": splits,
                       "checkpoint": run.document.parent_checkpoint,
                       "resume_mode": run.document.resume_mode})

    def _parent(self, child: str, parent_id: str) -> RunFiles | None:
        """The parent's files; None for a parent that is gone or the moving best alias;
        LineageError for one whose files cannot be read."""
        if parent_id == "best":
            return None
        try:
            if not self.reader.exists(parent_id):
                return None
            parent = self.reader.read(parent_id)
        except (OSError, ValueError) as exc:
            raise LineageError(f"run {child}: ancestor {parent_id} cannot be read "
                               f"({exc})") from None
        if parent.unreadable is not None:
            raise LineageError(f"run {child}: the provenance of ancestor {parent_id} cannot "
                               f"be read ({parent.unreadable})")
        return parent

    def _followed(self, run: RunFiles, attempt: AttemptRecord, link: Mapping[str, Any],
                  parent: RunFiles, chain: tuple[str, ...]) -> dict[str, Any] | None:
        """The followed parent's reference, or None when it is not followed."""
        recorded, epoch = link.get("attempt_id"), link.get("epoch")
        current = parent.attempt
        if parent.provenance is None:
            follow, completed = epoch is not None, False
        elif recorded is not None:
            follow = current is not None and current.attempt_id == recorded
            completed = follow and _completed_before(current, attempt)
        else:
            follow = completed = _completed_before(current, attempt)
        if not follow:
            return None
        tag = run.document.parent_checkpoint
        needs_epoch = (isinstance(tag, str) and tag not in _MOVING) or not completed
        if needs_epoch and epoch is None:
            return None  # a start epoch that is part of the procedure but not recorded
        identity = self._identity(parent, chain)
        depth = 1 + self._depth[parent.run_id]
        # Known identities are reused, so the limit is counted through them too: the order
        # in which runs are listed never changes what is refused.
        if len(chain) - 1 + depth > MAX_ANCESTORS:
            raise LineageError(f"run {chain[0]}: more than {MAX_ANCESTORS} ancestors; "
                               "refusing to follow them further")
        self._depth[run.run_id] = depth
        if identity is None:
            return None
        # A fresh run's identity leaves its data out (an observation carries the data
        # identity beside it), so the parent's declared data and splits join here: two
        # parents pretrained on different data give fine-tunes that never pool.
        data, splits = _declared(parent)
        return {"identity": identity, "data": data, "splits": splits,
                "start_epoch": epoch if needs_epoch else None}


def _declared(run: RunFiles) -> tuple[Any, Any]:
    """The data and split identities ``run``'s provenance declares (None without one)."""
    manifest = run.provenance.manifest.document() if run.provenance else {}
    return manifest.get("data"), manifest.get("splits")


def _named(parent_id: str, link: Mapping[str, Any], checkpoint_id: str | None
           ) -> dict[str, Any] | None:
    """A parent that is not followed, by the checkpoint the child recorded, or else by its
    attempt and start epoch; None (unknown) without such a record."""
    if checkpoint_id is not None:
        # Every saved checkpoint has its own id (metadata.yaml's resume record), so it
        # names that checkpoint exactly, also when it was reached through the best alias.
        return {"checkpoint_id": checkpoint_id}
    run_id = link.get("run_id") or parent_id
    if link.get("checkpoint") is not None and (
            link.get("generation") is not None or link.get("bundle_generation") is not None):
        return {"run_id": run_id, "checkpoint": link.get("checkpoint"),
                "generation": link.get("generation"),
                "bundle_generation": link.get("bundle_generation")}
    if link.get("attempt_id") is not None and link.get("epoch") is not None:
        return {"run_id": run_id, "attempt_id": link["attempt_id"], "start_epoch": link["epoch"]}
    return None
