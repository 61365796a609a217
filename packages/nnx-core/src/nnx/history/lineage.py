"""Lineage: a continuation's history, prefixed by what it resumed from (§4.5).

A run is a continuation when its metadata.yaml records a resume (``resume``
with a mode other than ``fresh``); its parent is ``train.parent_run_id`` in
run.yaml (else ``resume.source_run``), looked up next to the run. The branch
epoch is ``resume.source_epoch``; for runs recorded without it, the epoch of
the source checkpoint (``resume.source_checkpoint`` / ``train.parent_checkpoint``,
default ``last``) as it reads now. The parent's records come first, up to the
branch epoch and never past the child's first record, then the child's. A run
that started fresh (a born-again generation naming a parent too) has only its
own history.

The recorded parent and tag are data, so the path rule applies to them
(docs/durability.md): each must be one plain name, and nothing the lineage
reads of the parent may be reached through a symbolic link below the runs
root. A parent that fails either is never read; the lineage starts at the
child, with a RuntimeWarning naming the value, like the other fallbacks.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnx._foundation.records import NNIterationDataPoint
from nnx._foundation.validation import check_run_id
from nnx._journal.reader import own_records
from nnx._persistence.last_epoch import checkpoint_epoch, committed_epoch
from nnx._persistence.run_document import read_yaml
from nnx._persistence.run_files import check_run_files

__all__ = ["MAX_ANCESTORS", "lineage_records"]

MAX_ANCESTORS = 64


@dataclass(frozen=True, slots=True)
class _Link:
    parent: str
    source_epoch: int | None
    checkpoint: str


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _link(run_dir: Path) -> _Link | None:
    """The run this one resumed from, or None when it started fresh."""
    resume = read_yaml(run_dir / "metadata.yaml").get("resume")
    if not isinstance(resume, dict) or resume.get("mode", "fresh") == "fresh":
        return None
    train = read_yaml(run_dir / "run.yaml").get("train")
    train = train if isinstance(train, dict) else {}
    parent = _text(train.get("parent_run_id")) or _text(resume.get("source_run"))
    if parent is None:
        return None
    epoch = resume.get("source_epoch")
    tag = (_text(resume.get("source_checkpoint")) or _text(train.get("parent_checkpoint"))
           or "last")
    return _Link(parent, epoch if isinstance(epoch, int) and not isinstance(epoch, bool)
                 else None, tag)


def _warn(run_dir: Path, why: str) -> None:
    warnings.warn(f"history lineage of run {run_dir.name}: {why}", RuntimeWarning, stacklevel=2)


def _refusal(run_dir: Path, link: _Link) -> str | None:
    """Why the recorded parent may not be read (the path rule), or None."""
    try:
        check_run_id("its recorded parent run", link.parent)
        check_run_id("its recorded source checkpoint", link.checkpoint,
                     what="checkpoint tag")
        # What any reader of a run reads (its link, LAST, its history), and the source
        # checkpoint.
        check_run_files(run_dir.parent / link.parent, f"checkpoints/{link.checkpoint}.pt")
    except ValueError as exc:  # UnsafePathError is one
        return str(exc)
    return None


def _branch_epoch(link: _Link, parent_dir: Path) -> int | None:
    if link.source_epoch is not None:
        return link.source_epoch
    try:
        return checkpoint_epoch(parent_dir / "checkpoints" / f"{link.checkpoint}.pt")
    except Exception:
        return None


def _parent_limit(parent_dir: Path) -> int | None:
    try:
        return committed_epoch(parent_dir)
    except ValueError:
        return None


def _prefix(run_dir: Path, child_first: int | None, seen: frozenset[Path]
            ) -> Iterator[NNIterationDataPoint]:
    """The parent's lineage records that precede this run's own."""
    link = _link(run_dir)
    if link is None:
        return
    if link.parent == "best":
        _warn(run_dir, "it resumed through the runs/best pointer, which may name another run "
                       "by now; starting at this run")
        return
    refused = _refusal(run_dir, link)
    if refused is not None:
        _warn(run_dir, f"{refused}; its parent is not read, starting at this run")
        return
    parent_dir = run_dir.parent / link.parent
    if not parent_dir.is_dir():
        _warn(run_dir, f"its parent run {link.parent} is gone; starting at this run")
        return
    parent_dir = parent_dir.resolve()
    if parent_dir in seen or len(seen) > MAX_ANCESTORS:
        _warn(run_dir, f"more than {MAX_ANCESTORS} ancestors or a cycle at {link.parent}; "
                       "starting at this run")
        return
    branch = _branch_epoch(link, parent_dir)
    if branch is None:
        if child_first is None:
            _warn(run_dir, f"neither the branch epoch (checkpoint {link.checkpoint!r} of "
                           f"{link.parent} is unreadable) nor a first record is known; "
                           "starting at this run")
            return
        _warn(run_dir, f"the branch epoch is unknowable (checkpoint {link.checkpoint!r} of "
                       f"{link.parent} is unreadable); using the parent's records before "
                       f"epoch {child_first}")
        cut = child_first - 1
        limit = _parent_limit(parent_dir)
        limit = cut if limit is None else min(limit, cut)
    else:
        cut = branch if child_first is None else min(branch, child_first - 1)
        limit = cut
    for record in lineage_records(parent_dir, limit, seen | {parent_dir}):
        if record.epoch > cut:
            return
        yield record


def lineage_records(run_dir: Path, last_epoch: int | None,
                    seen: frozenset[Path] = frozenset()) -> Iterator[NNIterationDataPoint]:
    """The parent lineage's records up to the branch epoch, then this run's own."""
    own = own_records(run_dir, last_epoch)
    first = next(own, None)
    yield from _prefix(run_dir, None if first is None else first.epoch,
                       seen | {run_dir.resolve()})
    if first is not None:
        yield first
        yield from own
