"""``nnx runs list`` from the runs' listing summaries (:mod:`nnx._persistence.run_summary`),
without torch (spec §4; docs/durability.md, "The listing summary").

Per run it reads the summary, LAST's live manifest, the bytes of run.yaml and
metadata.yaml (hashed, not parsed: the commit that wrote the summary checked these
very bytes as the full path checks them), the history's ends and attempt.json; it
stats last.pt and best.pt and probes the lease as everywhere. A run whose summary
cannot be trusted (none: written before summaries; a digest that does not verify; a
LAST newer than it; files changed since), or that reads as damaged here, or whose
net needs an absent add-on, is summarized by the full path
(:mod:`nnx._persistence.run_listing`, imported only then: it loads torch), which
names the damage as before. Empty reservations are recognized here, torch-free.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path

from nnx._foundation.locking import lock_is_held
from nnx._foundation.validation import check_run_id
from nnx._persistence.best_pointer import BEST_NAME
from nnx._persistence.history_completeness import LastMark
from nnx._persistence.history_ends import check_history_ends
from nnx._persistence.reservation_shape import is_empty_reservation
from nnx._persistence.run_damage import RunDamagedError
from nnx._persistence.run_files import check_run_files
from nnx._persistence.run_summary import (
    CHECKED_FILES,
    SUMMARY_NAME,
    file_digest,
    history_signature,
    read_summary,
)

__all__ = ["ADD_ON", "CHANGED", "DAMAGED", "NO_SUMMARY", "FullPathRun", "RunSummary",
           "created_at", "format_score", "incomplete_row", "list_runs", "matching_run_ids",
           "status_of"]

# Why a run is left to the full path (FullPathRun.reason). Only the first two are worth
# a note on stderr: an add-on's run is shown as "<net> (needs <distribution>)" and a
# damaged one as a damaged row, which say it themselves.
NO_SUMMARY = "no summary"  # none written: a run from before listing summaries
CHANGED = "changed"  # a summary that no longer matches the run's files
ADD_ON = "add-on"  # its net needs a distribution this environment lacks
DAMAGED = "damaged"  # something the full path will name


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One row of ``nnx runs list``."""

    run_id: str
    created: datetime | None  # when the run was reserved (local time)
    net: str
    epochs: int  # epochs committed: LAST's epoch + 1, 0 before the first commit
    planned: int  # the epoch the plan ends at (exclusive), as LAST records it
    status: str  # running | committed | interrupted | incomplete
    best_epoch: int | None
    best_what: str | None  # "val error", "val loss", ..., or the named monitor
    best_value: float | None
    salt: str | None
    data_id: str | None


def format_score(what: str, value: float) -> str:
    """An error (a fraction) to three places; a loss or a monitor to four digits."""
    return f"{value:.3f}" if what.endswith("error") else f"{value:.4g}"


def _attempt_status(path: str) -> str | None:
    # On first use: a fit without provenance= never loads its readers (issue 38).
    from nnx.provenance.reading import read_provenance

    with warnings.catch_warnings():  # unreadable provenance is ignored here as everywhere
        warnings.simplefilter("ignore", RuntimeWarning)
        prov = read_provenance(path)
    return None if prov is None or prov.attempt is None else prov.attempt.status


def status_of(root: Path, run_id: str, epochs: int, planned: int, stopped: bool) -> str:
    """running | committed | interrupted (run_listing's module docstring)."""
    # FitLoop._reserve holds this lease for the whole fit.
    if lock_is_held(os.path.join(root, ".leases", f"{run_id}.lock")):
        return "running"
    attempt = _attempt_status(os.path.join(root, run_id))
    if attempt is not None:
        return "committed" if attempt == "completed" else "interrupted"
    return "committed" if epochs and (epochs >= planned or stopped) else "interrupted"


def created_at(path: str | os.PathLike[str]) -> datetime | None:
    # The reservation marker is written once when the run is reserved; run.yaml
    # (rewritten on a resume) stands in for a run older than the marker.
    for name in (".history-committed-by-last", "run.yaml"):
        with contextlib.suppress(OSError):
            return datetime.fromtimestamp(os.stat(os.path.join(path, name)).st_mtime)
    return None


@cache
def _installed(distribution: str) -> bool:
    from importlib import metadata  # lazy: only an add-on's run asks (a costly import)

    try:
        metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class FullPathRun:
    """A run :func:`list_runs` leaves to the full path, and why (``NO_SUMMARY``,
    ``CHANGED``, ``ADD_ON`` or ``DAMAGED``)."""

    path: Path
    reason: str


def _row(root: Path, path: Path) -> RunSummary | str:
    """The run's row from its summary, or why the full path must decide."""
    run_dir = os.fspath(path)  # plain strings below: this runs once per listed run
    try:
        check_run_files(path)  # a link among the files read below: the full path names it
    except ValueError:
        return DAMAGED
    body = read_summary(run_dir)
    if body is None:
        return CHANGED if os.path.lexists(os.path.join(run_dir, SUMMARY_NAME)) else NO_SUMMARY
    try:
        # The checks the full path makes (run.yaml hashes to the run id, both parse)
        # were made by the commit that wrote the summary, for these very bytes.
        files = body["files"]
        if any(file_digest(run_dir, name) != files[name] for name in CHECKED_FILES):
            return CHANGED  # changed since: the full path checks them
        distribution = body["distribution"]
        if distribution not in (None, "nnx-core") and not _installed(str(distribution)):
            return ADD_ON  # shown as "<net> (needs <distribution>)" by the full path
        epoch, planned = body["epoch"], body["planned"]
        if not isinstance(epoch, int) or not isinstance(planned, int):
            return CHANGED
        # The history the commit wrote and checked, unchanged since (same file, same
        # size and time), ends where LAST does; any other is read from its ends.
        if body.get("history") is None or body["history"] != history_signature(run_dir):
            check_history_ends(path.name, path, LastMark(epoch, body["iter_idx"]))
    except (OSError, ValueError, KeyError, TypeError, RunDamagedError):
        return DAMAGED  # the full path names the damage
    best = body["best"]
    best = best if isinstance(best, Mapping) else {}
    epochs = epoch + 1
    return RunSummary(
        run_id=path.name, created=created_at(run_dir), net=str(body["net"]), epochs=epochs,
        planned=planned, status=status_of(root, path.name, epochs, planned,
                                          body["stopped"] is True),
        best_epoch=best.get("epoch"), best_what=best.get("what"),
        best_value=best.get("value"), salt=body["salt"], data_id=body["data_id"])


def incomplete_row(root: Path, run_id: str) -> RunSummary:
    """The row of an empty reservation: no configuration to show."""
    running = lock_is_held(root / ".leases" / f"{run_id}.lock")
    return RunSummary(run_id=run_id, created=created_at(root / run_id), net="-", epochs=0,
                      planned=0, status="running" if running else "incomplete",
                      best_epoch=None, best_what=None, best_value=None, salt=None,
                      data_id=None)


def list_runs(root: str | os.PathLike[str]) -> tuple[list[RunSummary], list[FullPathRun]]:
    """The rows under ``root`` this module can give (runs whose summaries can be
    trusted, empty reservations), and the runs (a run.yaml) the caller reads the full
    way, each with why: without a trusted summary, an absent add-on's, or damaged. A
    directory is listed when it is not hidden, not a link, and not runs/best's fallback
    directory; the rest is not a run and is skipped."""
    base = Path(root)
    rows: list[RunSummary] = []
    rest: list[FullPathRun] = []
    if not base.is_dir():
        return rows, rest
    for entry in sorted(base.iterdir()):
        if entry.name.startswith(".") or entry.is_symlink() or not entry.is_dir():
            continue
        if not (entry / "run.yaml").is_file():
            if entry.name != BEST_NAME and is_empty_reservation(entry):
                rows.append(incomplete_row(base, entry.name))
        elif isinstance(row := _row(base, entry), str):
            rest.append(FullPathRun(entry, row))
        else:
            rows.append(row)
    return rows, rest


def matching_run_ids(root: str | os.PathLike[str], text: str) -> list[str]:
    """``[text]`` when it names a run directory; else the runs whose id starts with it,
    sorted; ``[]`` for an empty or malformed id. Torch-free: ``nnx runs show`` and
    ``nnx runs verify`` resolve a prefix with it."""
    try:
        check_run_id("run id", text)
    except ValueError:
        return []
    base = Path(root)
    candidates = [entry for entry in (base.iterdir() if base.is_dir() else ())
                  if not entry.name.startswith(".") and entry.name != "best"
                  and not entry.is_symlink() and entry.is_dir()
                  and ((entry / "run.yaml").is_file() or (entry / "checkpoints").is_dir())]
    if any(entry.name == text for entry in candidates):
        return [text]
    return sorted(entry.name for entry in candidates if entry.name.startswith(text))

