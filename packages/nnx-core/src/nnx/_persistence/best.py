"""The runs/best pointer (spec §4.1): the committed run with the lowest score.

A candidate is a real run directory whose run.yaml and history load, with a
readable BEST checkpoint no later than its committed LAST, not selected by a
named monitor. The score is the BEST checkpoint's first finite of val error →
val loss → train error → train loss (+inf when none). Ties keep the
incumbent, then the lexicographically smallest id. The pointer is a relative
symlink ``runs/best -> <id>``; where symlinks are unavailable,
``runs/best/POINTER.txt`` holds the run's path. When no candidate remains the
pointer is removed: a missing pointer means "no winner yet".

Overwriting a run hands the pointer on and makes the old run ineligible in one
``.best.lock`` critical section (:func:`retire_run`): the old directory is
renamed aside to a dot-named trash directory, which is never a candidate, and
deleted only after the lock is released. So no election that interleaves with
the overwrite, from any process, can advertise the emptied run.

A promotion reads the incumbent's score from ``runs/.best-score.json``, a
verified cache (:mod:`nnx._persistence.best_score`: a digest of its content
bound to the owner's BEST manifest); anything that does not verify sends the
promotion down the exact path, and a hand-over is always confirmed on the
exact path first, so the cache can keep the pointer where it is but never
move it to a worse run. A promotion a crash interrupted is settled by the
next promotion or election in the root (:mod:`nnx._persistence.best_pending`).
A full election (no usable incumbent, or the owner being overwritten) reads
each candidate's run.yaml and its BEST and LAST records, never its history.

runs/best is NNx's: a regular file or a directory holding anything but
POINTER.txt at its name is never replaced or deleted (:func:`check_pointer_slot`
refuses such a root at admission).
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import uuid
import warnings
from collections.abc import Mapping
from pathlib import Path

from nnx._foundation.atomic import atomic_write_text, fsync_dir
from nnx._foundation.locking import file_lock
from nnx._foundation.records import NNIterationDataPoint, first_finite
from nnx._foundation.safe_paths import UnsafePathError
from nnx._persistence.best_pending import clear_pending, pending_runs
from nnx._persistence.best_pointer import (
    BEST_NAME,
    POINTER_FILE,
    current_best,
    is_own_fallback,
)
from nnx._persistence.best_score import SCORE_NAME, forget_score, read_score, write_score
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.checkpoint_format import read_record
from nnx._persistence.history_ends import check_history_ends
from nnx._persistence.point_flush import settle_points
from nnx._persistence.run import NNRun

__all__ = ["BEST_NAME", "SCORE_NAME", "candidate_score", "check_pointer_slot", "current_best",
           "discard_retired", "elect_best", "foreign_pointer", "promote_best", "recorded_score",
           "retire_run", "run_score"]


def run_score(run_dir: Path) -> float | None:
    """The run's BEST score if it is a candidate, else None."""
    if run_dir.name == BEST_NAME or run_dir.name.startswith(".") or run_dir.is_symlink():
        return None
    best = run_dir / "checkpoints" / "best.pt"
    if not (run_dir / "run.yaml").is_file() or not best.is_file():
        return None
    try:
        # Unverified: an election takes no other run's locks (§4.1) and reads only the
        # record; a damaged file still fails to decode and is no candidate.
        checkpoint = NNCheckpoint.from_file(best, verify=False)
        if checkpoint.named_monitor:
            return None
        # A committed BEST: the run and its history load, and BEST is no later than LAST.
        committed = NNRun.load(run_dir.name, root=run_dir.parent).committed_epoch()
    except Exception:  # a malformed artifact is never a candidate
        return None
    if committed is None or checkpoint.epoch > committed:
        return None
    return checkpoint.score


def _is_candidate_dir(run_dir: Path) -> bool:
    return not (run_dir.name == BEST_NAME or run_dir.name.startswith(".")
                or run_dir.is_symlink())


def candidate_score(run_dir: Path) -> float | None:
    """:func:`run_score` without parsing the history or reading a tensor: run.yaml loads
    and hashes to the directory, the history loads as judged from its ends (§4.1's
    "loadable history", :mod:`nnx._persistence.history_ends`), and BEST's and LAST's
    records (read without their tensors) show a committed BEST no later than LAST.
    What a full election reads of each run, so its cost does not grow with the runs'
    histories."""
    if not _is_candidate_dir(run_dir):
        return None
    checkpoints = run_dir / "checkpoints"
    if not (run_dir / "run.yaml").is_file() or not (checkpoints / "best.pt").is_file():
        return None
    try:
        NNRun._from_config(run_dir, run_dir.parent)
        best = read_record(checkpoints / "best.pt")
        committed = int(read_record(checkpoints / "last.pt")["epoch"])
        check_history_ends(run_dir.name, run_dir, committed)
        if best.get("named_monitor") or int(best["epoch"]) > committed:
            return None
        idp = best.get("idp")
        found = None if idp is None else first_finite(NNIterationDataPoint.from_state(idp))
    except Exception:  # a malformed artifact is never a candidate
        return None
    return math.inf if found is None else found[1]


def _temp_name() -> str:
    """The hand-over's temp names: ``.best.<pid>.<32 hex>``, the pointer's own pattern."""
    return f".best.{os.getpid()}.{uuid.uuid4().hex}"


def _record_score(root: Path, run_id: str | None, score: float | None) -> None:
    if run_id is None or score is None:
        forget_score(root)
    else:
        write_score(root, run_id, score)


def recorded_score(root: str | os.PathLike[str], run_id: str) -> float | None:
    """The score beside the pointer for ``run_id`` when runs/best names it and the record
    verifies (:mod:`nnx._persistence.best_score`); else None."""
    root = Path(root)
    if current_best(root) != run_id:
        return None
    return read_score(root, run_id)


def foreign_pointer(root: Path) -> Path | None:
    """``runs/best`` when something NNx did not write occupies it (a regular file, or a
    directory holding anything but POINTER.txt); None when the slot is NNx's or free."""
    pointer = root / BEST_NAME
    if pointer.is_symlink() or not os.path.lexists(pointer) or is_own_fallback(pointer):
        return None
    return pointer


def check_pointer_slot(root: Path) -> None:
    """Refuse a runs root whose runs/best is not NNx's: it would be replaced, and what the
    user keeps there must never be deleted (UnsafePathError naming it)."""
    occupied = foreign_pointer(root)
    if occupied is not None:
        raise UnsafePathError(
            f"{occupied.as_posix()} is a {'directory' if occupied.is_dir() else 'file'} NNx "
            "did not write; runs/best is the pointer to the best run and NNx never deletes "
            "what it did not write: move it elsewhere", path=occupied)


def _hand_over(root: Path, run_id: str | None, score: float | None) -> None:
    """Point runs/best at ``run_id`` (None: remove it) and record its score beside it;
    the root directory's flush makes both renames last. The BEST it names is durable
    first: the points an epoch commit has published are flushed before the pointer
    moves (:func:`~nnx._persistence.point_flush.settle_points`). The score's own bytes
    are not flushed: a cache that verifies or is ignored (best_score)."""
    settle_points()
    _point(root, run_id)
    _record_score(root, run_id, score)
    fsync_dir(root)


def _point(root: Path, run_id: str | None) -> None:
    pointer = root / BEST_NAME
    if foreign_pointer(root) is not None:
        # Occupied since admission checked it: leave it, never delete the user's files.
        warnings.warn(f"{pointer.as_posix()} is not NNx's pointer; runs/best is not updated "
                      "(move it elsewhere)", RuntimeWarning, stacklevel=3)
        return
    if run_id is None:
        if pointer.is_symlink():
            pointer.unlink()
        elif is_own_fallback(pointer):
            shutil.rmtree(pointer)
        return
    tmp = root / _temp_name()
    try:
        os.symlink(run_id, tmp, target_is_directory=True)
    except (OSError, NotImplementedError):
        # No symlinks (Windows without developer mode): a directory with a pointer file.
        if pointer.is_symlink():
            pointer.unlink()
        pointer.mkdir(exist_ok=True)
        atomic_write_text(pointer / POINTER_FILE, f"{root.name}/{run_id}\n", follow=False)
        return
    try:
        if is_own_fallback(pointer):
            shutil.rmtree(pointer)
        os.replace(tmp, pointer)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _has_best(run_dir: Path) -> bool:
    return (run_dir / "run.yaml").is_file() and (run_dir / "checkpoints" / "best.pt").is_file()


def promote_best(root: str | os.PathLike[str], run_id: str, score: float, *,
                 keep_marker: bool = False) -> str | None:
    """After ``run_id``'s BEST improved to ``score``: the same winner as a full
    :func:`elect_best`, reading only the incumbent and the runs marked pending
    (:mod:`nnx._persistence.best_pending`). Only this run's score changed, and it only
    went down, so it either beats the incumbent or nothing moves (ties keep the
    incumbent). A missing or no longer valid incumbent takes the full path.

    The incumbent's score comes from beside the pointer when that record verifies
    (:mod:`nnx._persistence.best_score`); a hand-over, and any record that does not,
    reads the incumbent exactly (:func:`run_score`) first. The caller holds .best.lock.

    ``keep_marker``: leave ``run_id``'s own pending marker (a live fit keeps it from its
    first BEST to its end, so each later BEST commit needs no directory flush for it;
    :meth:`EpochCommit.release_marker` clears it).
    """
    root = Path(root)
    winner, held = _promote(root, run_id, score)
    winner = _settle_pending(root, winner, held, skip=run_id)
    if not keep_marker:
        clear_pending(root, run_id)
    return winner


def _promote(root: Path, run_id: str, score: float) -> tuple[str | None, float | None]:
    """(the winner, its score) for :func:`promote_best`, before the pending runs."""
    if not _has_best(root / run_id):
        # The caller's BEST is not (or no longer) on disk, e.g. its run was renamed
        # aside by an overwrite: it cannot claim the slot, so elect from what is there.
        return _elect(root)
    incumbent = current_best(root)
    if incumbent == run_id and (root / BEST_NAME).exists():
        _record_score(root, run_id, score)  # its own BEST moved: keep the record current
        return run_id, score
    if incumbent is not None:
        recorded = recorded_score(root, incumbent)
        if recorded is not None and not score < recorded:
            return incumbent, recorded  # the common case: the incumbent holds
    held = None if incumbent is None else run_score(root / incumbent)
    if held is None:
        return _elect(root, known={run_id: score})
    if score < held:
        _hand_over(root, run_id, score)
        return run_id, score
    _record_score(root, incumbent, held)  # the record was missing or wrong: mend it
    return incumbent, held


def _settle_pending(root: Path, winner: str | None, held: float | None, *,
                    skip: str | None) -> str | None:
    """Hand runs/best to a run marked pending whose committed BEST beats ``winner``
    (which scores ``held``): a promotion a crash interrupted. Ties keep the winner."""
    for other in pending_runs(root):
        if other == skip:
            continue
        if other != winner:
            score = candidate_score(root / other)
            if score is not None and (winner is None or held is None or score < held):
                _hand_over(root, other, score)
                winner, held = other, score
        clear_pending(root, other, unless_live=True)
    return winner


def elect_best(root: str | os.PathLike[str], *, exclude: str | None = None,
               known: Mapping[str, float] | None = None) -> str | None:
    """Re-elect runs/best among the committed runs under ``root``; returns the winner.

    ``exclude`` drops one run from the candidates (a run about to be overwritten);
    ``known`` gives the scores of runs the caller has just committed, which are not
    read back. Every pending marker is settled by it (a full election reads them all).
    """
    return _elect(Path(root), exclude=exclude, known=known)[0]


def _elect(root: Path, *, exclude: str | None = None,
           known: Mapping[str, float] | None = None) -> tuple[str | None, float | None]:
    known = known or {}
    if not root.is_dir():
        return None, None
    incumbent = current_best(root)
    scored = []
    for entry in root.iterdir():
        if entry.name == exclude or not entry.is_dir():
            continue
        score = known[entry.name] if entry.name in known else candidate_score(entry)
        if score is not None:
            scored.append((score, entry.name))
    for marked in pending_runs(root):
        clear_pending(root, marked, unless_live=True)  # every candidate was just read
    if not scored:
        _hand_over(root, None, None)
        return None, None
    low = min(score for score, _ in scored)
    tied = sorted(name for score, name in scored if score == low or (
        math.isinf(low) and math.isinf(score)))
    winner = incumbent if incumbent in tied else tied[0]
    if winner != incumbent or not (root / BEST_NAME).exists():
        _hand_over(root, winner, low)
    else:
        _record_score(root, winner, low)
    return winner, low


def retire_run(root: str | os.PathLike[str], run_id: str) -> Path:
    """Take ``runs/<run_id>`` out of the election before an overwrite deletes it.

    Under ``.best.lock`` (the caller holds the lease and the admission lock, in
    that order): if the run owns runs/best, the best surviving committed run is
    elected first, so the pointer never names a missing directory; then the
    run directory is renamed to ``.<run_id>.overwritten.<nonce>``. A rename is
    atomic and dot names are never candidates, so once the lock is released no
    election (another run's promotion included) can pick the old artifacts.
    Returns the renamed directory; :func:`discard_retired` deletes it.
    """
    root = Path(root)
    with file_lock(root / ".best.lock", root=root):
        if current_best(root) == run_id:
            elect_best(root, exclude=run_id)
        retired = root / f".{run_id}.overwritten.{uuid.uuid4().hex[:8]}"
        os.rename(root / run_id, retired)
    return retired


def discard_retired(retired: Path) -> None:
    """Delete a directory :func:`retire_run` renamed aside (outside every lock: it may
    be large). A leftover is harmless, a dot name is never listed nor elected."""
    shutil.rmtree(retired, ignore_errors=True)
