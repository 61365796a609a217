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

A promotion reads the incumbent's score from ``runs/.best-score.json``, which
the hand-over writes beside the pointer under the same ``.best.lock``: the
run, its score and the identity (checkpoint id, generation) of the BEST it
scores. It is a cache, not a record: it counts only while it names the run the
pointer names and that run's live BEST manifest still names the same
checkpoint, no later than its LAST. Anything else (missing, torn, stale,
forged) sends the promotion down the exact path, and a hand-over is always
confirmed on the exact path first, so the cache can keep the pointer where it
is but never move it to a worse run. A full election (no usable incumbent, or
the owner being overwritten) reads each candidate's run.yaml and its BEST and
LAST records, never its history.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nnx._foundation.atomic import atomic_write_text
from nnx._foundation.locking import file_lock
from nnx._foundation.records import NNIterationDataPoint, first_finite
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.checkpoint_format import read_record
from nnx._persistence.history_ends import check_history_ends
from nnx._persistence.run import NNRun

__all__ = ["BEST_NAME", "SCORE_NAME", "candidate_score", "current_best", "discard_retired",
           "elect_best", "promote_best", "recorded_score", "retire_run", "run_score"]

BEST_NAME = "best"
SCORE_NAME = ".best-score.json"
_POINTER = "POINTER.txt"
_SCORE_FORMAT = "nnx.best/score-1"


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


# -- the score beside the pointer --------------------------------------------------------
def _temp_name() -> str:
    """The hand-over's temp names: ``.best.<pid>.<32 hex>``, the pointer's own pattern."""
    return f".best.{os.getpid()}.{uuid.uuid4().hex}"


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _best_identity(run_dir: Path) -> tuple[str, int, int] | None:
    """(checkpoint id, generation, epoch) of the run's settled BEST, from its live
    manifest; None while a publish is staged, without a manifest, or when BEST is past
    the epoch LAST's live manifest commits."""
    checkpoints = run_dir / "checkpoints"
    if (checkpoints / "best.pt.manifest.json.staged").exists() or not (
            run_dir / "run.yaml").is_file() or not (checkpoints / "best.pt").is_file():
        return None
    best, last = (_json(checkpoints / f"{tag}.pt.manifest.json") for tag in ("best", "last"))
    try:
        epoch = int(best["position"]["completed_epoch"])
        if int(last["position"]["completed_epoch"]) < epoch:
            return None
        return str(best["checkpoint_id"]), int(best["generation"]), epoch
    except (TypeError, KeyError, ValueError):
        return None


def _record_score(root: Path, run_id: str | None, score: float | None) -> None:
    """Write (or, for no run, remove) the score beside the pointer. Not flushed: after a
    power loss a torn or missing file only costs the next promotion the exact path."""
    path = root / SCORE_NAME
    identity = None if run_id is None else _best_identity(root / run_id)
    if run_id is None or score is None or identity is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    checkpoint_id, generation, _ = identity
    doc = {"format": _SCORE_FORMAT, "run": run_id, "score": score,
           "checkpoint_id": checkpoint_id, "generation": generation}
    atomic_write_text(path, json.dumps(doc, sort_keys=True) + "\n", sync=False,
                      temp=_temp_name())


def recorded_score(root: str | os.PathLike[str], run_id: str) -> float | None:
    """The score beside the pointer for ``run_id``, when it is consistent: it names
    ``run_id``, which runs/best names, and that run's settled BEST; else None."""
    root = Path(root)
    doc = _json(root / SCORE_NAME)
    if not isinstance(doc, dict) or doc.get("format") != _SCORE_FORMAT or doc.get(
            "run") != run_id or current_best(root) != run_id:
        return None
    identity = _best_identity(root / run_id)
    score = doc.get("score")
    if identity is None or (doc.get("checkpoint_id"), doc.get("generation")) != identity[:2]:
        return None
    if not isinstance(score, (int, float)) or isinstance(score, bool) or math.isnan(score):
        return None
    return float(score)


def current_best(root: Path) -> str | None:
    """The run id runs/best points at, or None."""
    pointer = root / BEST_NAME
    if pointer.is_symlink():
        return Path(os.readlink(pointer)).name
    marker = pointer / _POINTER
    if marker.is_file():
        return Path(marker.read_text(encoding="utf-8").strip()).name
    return None


def _hand_over(root: Path, run_id: str | None, score: float | None) -> None:
    """Point runs/best at ``run_id`` (None: remove it) and record its score beside it."""
    _point(root, run_id)
    _record_score(root, run_id, score)


def _point(root: Path, run_id: str | None) -> None:
    pointer = root / BEST_NAME
    if run_id is None:
        if pointer.is_symlink() or pointer.is_file():
            pointer.unlink()
        elif pointer.is_dir():
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
        atomic_write_text(pointer / _POINTER, f"{root.name}/{run_id}\n")
        return
    try:
        if pointer.is_dir() and not pointer.is_symlink():
            shutil.rmtree(pointer)
        os.replace(tmp, pointer)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def _has_best(run_dir: Path) -> bool:
    return (run_dir / "run.yaml").is_file() and (run_dir / "checkpoints" / "best.pt").is_file()


def promote_best(root: str | os.PathLike[str], run_id: str, score: float) -> str | None:
    """After ``run_id``'s BEST improved to ``score``: the same winner as a full
    :func:`elect_best`, reading only the incumbent. Only this run's score changed,
    and it only went down, so it either beats the incumbent or nothing moves (ties
    keep the incumbent). A missing or no longer valid incumbent takes the full path.

    The incumbent's score comes from beside the pointer when that record is
    consistent (:func:`recorded_score`); a hand-over, and any record that is not,
    reads the incumbent exactly (:func:`run_score`) first.
    """
    root = Path(root)
    if not _has_best(root / run_id):
        # The caller's BEST is not (or no longer) on disk, e.g. its run was renamed
        # aside by an overwrite: it cannot claim the slot, so elect from what is there.
        return elect_best(root)
    incumbent = current_best(root)
    if incumbent == run_id and (root / BEST_NAME).exists():
        _record_score(root, run_id, score)  # its own BEST moved: keep the record current
        return run_id
    if incumbent is not None:
        recorded = recorded_score(root, incumbent)
        if recorded is not None and not score < recorded:
            return incumbent  # the common case: the incumbent holds, nothing is read
    held = None if incumbent is None else run_score(root / incumbent)
    if held is None:
        return elect_best(root, known={run_id: score})
    if score < held:
        _hand_over(root, run_id, score)
        return run_id
    _record_score(root, incumbent, held)  # the record was missing or wrong: mend it
    return incumbent


def elect_best(root: str | os.PathLike[str], *, exclude: str | None = None,
               known: Mapping[str, float] | None = None) -> str | None:
    """Re-elect runs/best among the committed runs under ``root``; returns the winner.

    ``exclude`` drops one run from the candidates (a run about to be overwritten);
    ``known`` gives the scores of runs the caller has just committed, which are not
    read back.
    """
    known = known or {}
    root = Path(root)
    if not root.is_dir():
        return None
    incumbent = current_best(root)
    scored = []
    for entry in root.iterdir():
        if entry.name == exclude or not entry.is_dir():
            continue
        score = known[entry.name] if entry.name in known else candidate_score(entry)
        if score is not None:
            scored.append((score, entry.name))
    if not scored:
        _hand_over(root, None, None)
        return None
    low = min(score for score, _ in scored)
    tied = sorted(name for score, name in scored if score == low or (
        math.isinf(low) and math.isinf(score)))
    winner = incumbent if incumbent in tied else tied[0]
    if winner != incumbent or not (root / BEST_NAME).exists():
        _point(root, winner)
    _record_score(root, winner, low)
    return winner


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
