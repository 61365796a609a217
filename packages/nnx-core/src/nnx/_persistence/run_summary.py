"""A run's listing summary, ``summary.json``: what ``nnx runs list`` shows of it, written
at the end of each epoch commit (docs/durability.md, "The listing summary").

It is a derived cache, never the truth: it is written atomically but not flushed (a
crash may lose it or leave an older one; the atomic writer's temp, ``.summary.json.<8
hex>``, is a leftover the scanner already recognizes), and it carries its own digest
(SHA-256 of its canonical body) and LAST's generation and checkpoint id. A reader trusts
it only when the digest verifies and LAST's live manifest names the same point;
anything else (no summary, an older one, a damaged one, a staged LAST) sends the
reader back to the checkpoints.

Reading imports nothing heavy (no torch): ``nnx runs list`` answers at once. Writing
happens inside the commit, where torch is loaded already.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nnx._foundation.atomic import atomic_write_bytes
from nnx._foundation.bounded import load_json
from nnx._foundation.hashing import canonical_bytes, sha256_hex

__all__ = ["SUMMARY_FORMAT", "SUMMARY_NAME", "read_summary", "write_summary"]

SUMMARY_NAME = "summary.json"
SUMMARY_FORMAT = "nnx.run_summary/1"


def _manifest(run_dir: Path, tag: str) -> Mapping[str, Any] | None:
    """The live manifest of ``tag``'s point as raw JSON (no torch), None without one."""
    path = run_dir / "checkpoints" / f"{tag}.pt.manifest.json"
    if path.is_symlink() or not path.is_file():
        return None
    doc = load_json(path)
    return doc if isinstance(doc, Mapping) else None


def _point_id(manifest: Mapping[str, Any] | None) -> list[Any] | None:
    return None if manifest is None else [manifest.get("generation"),
                                          manifest.get("checkpoint_id")]


def read_summary(run_dir: Path) -> Mapping[str, Any] | None:
    """The summary's body when it can be trusted (its digest verifies, it names its run,
    and LAST's live manifest is the point it describes, with no staged save pending);
    None otherwise. Never raises for what it reads: an unusable summary is no summary."""
    try:
        doc = load_json(run_dir / SUMMARY_NAME)
        body = doc["body"]
        if (not isinstance(body, Mapping) or body.get("format") != SUMMARY_FORMAT
                or sha256_hex(canonical_bytes(body)) != doc["sha256"]
                or body.get("run_id") != run_dir.name):
            return None
        if (run_dir / "checkpoints" / "last.pt.manifest.json.staged").exists():
            return None  # a save of LAST in flight or killed: the checkpoints decide
        if _point_id(_manifest(run_dir, "last")) != body.get("last"):
            return None
        return body
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_summary(run_dir: Path, *, epoch: int, iter_idx: int | None, net: str,
                  distribution: str | None, salt: str | None, data_id: str | None,
                  best_of_this_commit: tuple[int, str | None, float | None],
                  best_score: Any) -> None:
    """Write the summary of the point LAST's live manifest names. BEST's row is this
    commit's (``best_of_this_commit``) when BEST's manifest names LAST's point (a BEST
    saved in this commit shares it), the previous summary's when BEST is the point
    that one recorded, else ``best_score(path)`` read from BEST itself (rare: the first
    commit after a resume of a run without a summary). A no-op without a live LAST."""
    last = _manifest(run_dir, "last")
    if last is None:
        return
    previous = read_summary_body(run_dir)
    if previous is not None and previous.get("last") == _point_id(last):
        return  # it describes this very point already (a final LAST refresh that was skipped)
    best_manifest = _manifest(run_dir, "best")
    best_id = _point_id(best_manifest)
    best: dict[str, Any] | None = None
    if best_manifest is not None:
        if best_id == _point_id(last):
            found = best_of_this_commit
        else:
            kept = None if previous is None else previous.get("best")
            if isinstance(kept, Mapping) and kept.get("point") == best_id:
                found = (kept["epoch"], kept["what"], kept["value"])
            else:
                found = best_score(run_dir / "checkpoints" / "best.pt")
        best = {"point": best_id, "epoch": found[0], "what": found[1], "value": found[2]}
    position = last.get("position")
    position = position if isinstance(position, Mapping) else {}
    planned = position.get("planned_n_epochs")
    body = {"format": SUMMARY_FORMAT, "run_id": run_dir.name, "last": _point_id(last),
            "epoch": epoch, "iter_idx": iter_idx, "planned": planned if isinstance(
                planned, int) and not isinstance(planned, bool) else None,
            "stopped": position.get("stopped") is True, "net": net,
            "distribution": distribution, "salt": salt, "data_id": data_id, "best": best}
    data = canonical_bytes({"body": body, "sha256": sha256_hex(canonical_bytes(body))})
    # No flush: a derived cache the reader checks against LAST (module docstring).
    atomic_write_bytes(run_dir / SUMMARY_NAME, data, sync=False)


def read_summary_body(run_dir: Path) -> Mapping[str, Any] | None:
    """The previous summary's body when its digest verifies, whatever point it names
    (the writer carries BEST's row forward from it)."""
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        doc = load_json(run_dir / SUMMARY_NAME)
        body = doc["body"]
        if isinstance(body, Mapping) and sha256_hex(canonical_bytes(body)) == doc["sha256"]:
            return body
    return None
