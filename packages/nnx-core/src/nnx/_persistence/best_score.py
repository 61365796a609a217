"""The score beside runs/best (``runs/.best-score.json``): a verified cache, never a record.

The hand-over writes it under ``.best.lock``: the run runs/best names, its
score, the identity (checkpoint id, generation) of the BEST that scores it,
the SHA-256 of that BEST's live manifest, and a SHA-256 of all of these. A
promotion trusts it only when every part still holds:

* the digest matches the content (one changed digit, a torn or truncated file);
* it names the run runs/best names, whose live BEST manifest hashes to the
  recorded digest (so it is bound to that BEST, no later than LAST, and no
  publish is staged);
* the score equals the one that manifest's position records (a forged score
  with a recomputed digest still has to agree with the point the run wrote).

Anything else (missing, unreadable, too large, too deep, a symlink, stale,
forged) is ignored: the promotion reads the incumbent exactly and rewrites the
file. So the cache can keep the pointer where it is but never move it to a
worse run. The file is replaced, never followed: a symlink planted at its name
is swapped for a regular file, and its target is never written.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
from pathlib import Path
from typing import Any

from nnx._foundation.atomic import atomic_write_bytes
from nnx._foundation.bounded import load_json
from nnx._foundation.hashing import canonical_bytes, sealed
from nnx._persistence.known_files import recall
from nnx._persistence.point_position import COMPLETED_EPOCH, SCORE

__all__ = ["SCORE_NAME", "best_identity", "forget_score", "read_score", "write_score"]

SCORE_NAME = ".best-score.json"
_FORMAT = "nnx.best/score-2"
_MAX_BYTES = 4096  # the record is ~300 bytes


def _manifest(run_dir: Path, tag: str) -> tuple[str, Any] | None:
    """(the SHA-256 of ``tag``'s live manifest, what it says): as this process wrote it
    when it still is that file (:mod:`nnx._persistence.known_files`), else read."""
    path = run_dir / "checkpoints" / f"{tag}.pt.manifest.json"
    known = recall(path)
    if known is not None:
        doc, digest = known
        return digest, doc
    try:
        data = path.read_bytes() if not path.is_symlink() else None
        return None if data is None else (hashlib.sha256(data).hexdigest(), load_json(
            data=data, where=path.name, max_bytes=1 << 20))
    except (OSError, ValueError):
        return None


def best_identity(run_dir: Path) -> dict[str, Any] | None:
    """What the cache binds of a run's settled BEST: ``checkpoint_id``, ``generation``,
    ``manifest`` (its live manifest's SHA-256) and ``score`` (as its position records
    it, None when it records none); None while a publish is staged, without a manifest,
    or when BEST is past the epoch LAST's live manifest commits."""
    checkpoints = run_dir / "checkpoints"
    if (checkpoints / "best.pt.manifest.json.staged").exists() or not (
            run_dir / "run.yaml").is_file() or not (checkpoints / "best.pt").is_file():
        return None
    best, last = _manifest(run_dir, "best"), _manifest(run_dir, "last")
    if best is None or last is None:
        return None
    try:
        doc, epoch = best[1], int(best[1]["position"][COMPLETED_EPOCH])
        if int(last[1]["position"][COMPLETED_EPOCH]) < epoch:
            return None
        score = doc["position"].get(SCORE)
        return {"checkpoint_id": str(doc["checkpoint_id"]), "generation": int(doc["generation"]),
                "manifest": best[0],
                "score": None if score is None else float(score)}
    except (TypeError, KeyError, ValueError, AttributeError):
        return None


def _digest(fields: dict[str, Any]) -> str:
    return hashlib.sha256(canonical_bytes(fields)).hexdigest()


def write_score(root: Path, run_id: str, score: float) -> None:
    """Record ``run_id``'s ``score`` beside the pointer (or forget the record when the run's
    BEST is not settled). Never flushed by itself: a hand-over's directory flush makes
    its rename last with the pointer's; after a power loss a record whose bytes did not
    (or a stale one) fails verification and only costs the next promotion the exact
    path."""
    identity = best_identity(root / run_id)
    if identity is None or not math.isfinite(score):
        forget_score(root)
        return
    fields = {"format": _FORMAT, "run": run_id, "score": score,
              "checkpoint_id": identity["checkpoint_id"], "generation": identity["generation"],
              "manifest": identity["manifest"]}
    atomic_write_bytes(root / SCORE_NAME, sealed(canonical_bytes(fields)) + b"\n", sync=False,
                       follow=False, temp=f".best.{os.getpid()}.score.{os.urandom(8).hex()}")


def forget_score(root: Path) -> None:
    """Remove the record (a symlink at its name included: the link, never its target)."""
    with contextlib.suppress(FileNotFoundError):
        (root / SCORE_NAME).unlink()


def read_score(root: Path, run_id: str) -> float | None:
    """The recorded score of ``run_id`` when every check of the module docstring holds
    (the caller has checked that runs/best names ``run_id``); else None."""
    path = root / SCORE_NAME
    if path.is_symlink():
        return None
    try:
        doc = load_json(path, max_bytes=_MAX_BYTES)
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT or doc.get("run") != run_id:
        return None
    fields = {k: v for k, v in doc.items() if k != "sha256"}
    try:
        if doc.get("sha256") != _digest(fields):
            return None
    except (TypeError, ValueError):
        return None
    identity = best_identity(root / run_id)
    score = doc.get("score")
    if identity is None or not isinstance(score, (int, float)) or isinstance(score, bool):
        return None
    if (doc.get("checkpoint_id"), doc.get("generation"), doc.get("manifest")) != (
            identity["checkpoint_id"], identity["generation"], identity["manifest"]):
        return None
    if identity["score"] is not None and float(score) != identity["score"]:
        return None  # (a BEST written before positions carried a score has none to agree)
    return float(score)
