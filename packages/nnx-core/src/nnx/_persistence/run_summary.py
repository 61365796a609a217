"""A run's listing summary, ``summary.json``: what ``nnx runs list`` shows of it, written
at the end of each epoch commit (docs/durability.md, "The listing summary").

It is a derived cache, never the truth: it is written atomically but not flushed (a
crash may lose it or leave an older one; the atomic writer's temp, ``.summary.json.<8
hex>``, is a leftover the scanner already recognizes), and it carries its own digest
(SHA-256 of its canonical body) and LAST's generation and checkpoint id. A reader trusts
it only when the digest verifies and LAST's live manifest names the same point;
anything else (no summary, an older one, a damaged one, a staged LAST) sends the
reader back to the checkpoints. It also records the SHA-256 of run.yaml's and
metadata.yaml's bytes once the writer has checked them (run.yaml hashes to the run id,
both parse), so a reader finding the same bytes need not parse them.

Reading imports nothing heavy (no torch): ``nnx runs list`` answers at once. Writing
happens inside the commit, where torch is loaded already, from what the commit wrote:
LAST's and BEST's manifests, the previous summary and the YAML files' digests as this
process wrote or last read them, while each is still that file
(:mod:`nnx._persistence.known_files`); read from disk otherwise, with the same result.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from nnx._foundation.atomic import atomic_write_bytes
from nnx._foundation.bounded import load_json, load_yaml, read_bounded
from nnx._foundation.hashing import canonical_bytes, md5_hex, sealed, sha256_hex
from nnx._persistence.known_files import file_identity, recall, remember
from nnx._persistence.point_position import PLANNED_N_EPOCHS, STOPPED

__all__ = ["CHECKED_FILES", "SUMMARY_FORMAT", "SUMMARY_NAME", "file_digest", "history_signature",
           "read_summary", "write_summary"]

SUMMARY_NAME = "summary.json"
SUMMARY_FORMAT = "nnx.run_summary/1"
#: The run's YAML files, recorded by their bytes' SHA-256 once checked (run.yaml hashes
#: to the run id, both parse): a reader finding the same bytes need not parse them again.
CHECKED_FILES = ("run.yaml", "metadata.yaml")


# The reader runs once per run of a listing (a thousand of them): it joins plain strings
# and calls os directly, since pathlib's objects cost more than the reads themselves.


def file_digest(run_dir: str | os.PathLike[str], name: str) -> str | None:
    """SHA-256 of the file's bytes; None when it is absent."""
    try:
        return sha256_hex(read_bounded(os.path.join(run_dir, name)))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def _known_digest(run_dir: Path, name: str) -> str | None:
    """:func:`file_digest`, read once per file a process sees: each commit of a fit finds
    run.yaml and metadata.yaml as the previous one hashed them (one ``lstat`` each)."""
    path = run_dir / name
    known = recall(path)
    if known is not None:
        return str(known)
    identity = file_identity(path)  # before the read: a file replaced meanwhile never matches
    digest = file_digest(run_dir, name)
    if digest is not None and identity is not None:
        remember(path, digest, identity)
    return digest


def history_signature(run_dir: str | os.PathLike[str]) -> list[int] | None:
    """(inode, size, mtime in ns) of the eager history ``idps.csv``, None without one: the
    commit records it after writing the history, and a listing finding the same file
    (a rewrite is a new inode; a cut or a torn tail another size) need not read its
    ends again (history_ends)."""
    try:
        found = os.stat(os.path.join(run_dir, "idps.csv"))
    except OSError:
        return None
    return [found.st_ino, found.st_size, found.st_mtime_ns]


def _checked_files(run_dir: Path,
                   previous: Mapping[str, Any] | None) -> dict[str, str | None] | None:
    """The digests of :data:`CHECKED_FILES` after checking them as the full listing
    does; a file whose bytes the previous summary recorded is not parsed again (the
    commits of one fit parse each once). None when a check fails: no summary then, and
    the listing's full path names the damage."""
    kept = None if previous is None else previous.get("files")
    kept = kept if isinstance(kept, Mapping) else {}
    found: dict[str, str | None] = {}
    for name in CHECKED_FILES:
        digest = _known_digest(run_dir, name)
        if digest is not None and kept.get(name) != digest:
            try:
                doc = load_yaml(run_dir / name)
            except ValueError:
                return None
            if name == "run.yaml" and md5_hex(doc) != run_dir.name:
                return None
        found[name] = digest
    return found


def _manifest(run_dir: str | os.PathLike[str], tag: str) -> Mapping[str, Any] | None:
    """The live manifest of ``tag``'s point as raw JSON (no torch), None without one."""
    path = os.path.join(run_dir, "checkpoints", f"{tag}.pt.manifest.json")
    try:
        found = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(found.st_mode):  # a link or anything else: not a manifest to read
        return None
    doc = load_json(path)
    return doc if isinstance(doc, Mapping) else None


def _published(run_dir: Path, tag: str) -> Mapping[str, Any] | None:
    """:func:`_manifest` as this process published it, while it still is that file
    (:mod:`nnx._persistence.known_files`): the commit that just wrote it reads nothing."""
    known = recall(run_dir / "checkpoints" / f"{tag}.pt.manifest.json")
    return known[0] if known is not None else _manifest(run_dir, tag)


def _point_id(manifest: Mapping[str, Any] | None) -> list[Any] | None:
    return None if manifest is None else [manifest.get("generation"),
                                          manifest.get("checkpoint_id")]


def read_summary(run_dir: str | os.PathLike[str]) -> Mapping[str, Any] | None:
    """The summary's body when it can be trusted (its digest verifies, it names its run,
    and LAST's live manifest is the point it describes, with no staged save pending);
    None otherwise. Never raises for what it reads: an unusable summary is no summary."""
    body = read_summary_body(run_dir)
    try:
        if (body is None or body.get("format") != SUMMARY_FORMAT
                or body.get("run_id") != os.path.basename(run_dir)):
            return None
        if os.path.exists(os.path.join(run_dir, "checkpoints",
                                       "last.pt.manifest.json.staged")):
            return None  # a save of LAST in flight or killed: the checkpoints decide
        last = _manifest(run_dir, "last")
        if _point_id(last) != body.get("last") or not _whole(run_dir, "last", last):
            return None
        best = body.get("best")
        if isinstance(best, Mapping) and not _whole(run_dir, "best", best):
            return None
        return body
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _checkpoint_size(manifest: Mapping[str, Any] | None) -> Any:
    files = None if manifest is None else manifest.get("files")
    entry = files.get("checkpoint") if isinstance(files, Mapping) else None
    return entry.get("size") if isinstance(entry, Mapping) else None


def _whole(run_dir: str | os.PathLike[str], tag: str, recorded: Mapping[str, Any] | None
           ) -> bool:
    """Whether ``tag``'s checkpoint file has the size its manifest records (``recorded``:
    the manifest, or the summary's BEST row, which keeps BEST's size): one stat, which
    catches an emptied or truncated file the way the full path's record read does;
    the bytes themselves are ``nnx runs verify``'s."""
    if tag == "best" and recorded is not None:
        size = recorded.get("size")
    else:
        size = _checkpoint_size(recorded)
    path = os.path.join(run_dir, "checkpoints", f"{tag}.pt")
    return isinstance(size, int) and os.stat(path).st_size == size


def write_summary(run_dir: Path, *, epoch: int, iter_idx: int | None, net: str,
                  distribution: str | None, salt: str | None, data_id: str | None,
                  best_of_this_commit: tuple[int, str | None, float | None],
                  best_score: Any) -> None:
    """Write the summary of the point LAST's live manifest names. BEST's row is this
    commit's (``best_of_this_commit``) when BEST's manifest names LAST's point (a BEST
    saved in this commit shares it), the previous summary's when BEST is the point
    that one recorded, else ``best_score(path)`` read from BEST itself (rare: the first
    commit after a resume of a run without a summary). A no-op without a live LAST."""
    last = _published(run_dir, "last")
    if last is None:
        return
    path = run_dir / SUMMARY_NAME
    previous = recall(path)  # the body this process wrote last, while it is still that file
    if previous is None:
        previous = read_summary_body(run_dir)
    if previous is not None and previous.get("last") == _point_id(last):
        return  # it describes this very point already (a final LAST refresh that was skipped)
    best_manifest = _published(run_dir, "best")
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
        best = {"point": best_id, "epoch": found[0], "what": found[1], "value": found[2],
                "size": _checkpoint_size(best_manifest)}
    position = last.get("position")
    position = position if isinstance(position, Mapping) else {}
    planned = position.get(PLANNED_N_EPOCHS)
    body = {"format": SUMMARY_FORMAT, "run_id": run_dir.name, "last": _point_id(last),
            "epoch": epoch, "iter_idx": iter_idx, "planned": planned if isinstance(
                planned, int) and not isinstance(planned, bool) else None,
            "stopped": position.get(STOPPED) is True, "net": net,
            "distribution": distribution, "salt": salt, "data_id": data_id, "best": best,
            "files": _checked_files(run_dir, previous), "history": history_signature(run_dir)}
    if body["files"] is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # an older one would be stale anyway
        return
    # canonical_bytes({"body": body, "sha256": <its digest>}), the body encoded once.
    raw = canonical_bytes(body)
    data = sealed(_HEAD + raw + b"}", hashed=raw)
    # No flush: a derived cache the reader checks against LAST (module docstring).
    atomic_write_bytes(path, data, sync=False)
    remember(path, body)


#: The file is the canonical form of {"body": ..., "sha256": ...}: the body's canonical
#: bytes between these two ends, so its digest is checked on the bytes as read, with no
#: re-encoding (a listing reads a thousand of them).
_HEAD = b'{"body":'
_TAIL = re.compile(rb',"sha256":"([0-9a-f]{64})"\}\Z')


def read_summary_body(run_dir: str | os.PathLike[str]) -> Mapping[str, Any] | None:
    """The summary's body when its digest verifies, whatever point it names (the writer
    carries BEST's row forward from it); None otherwise."""
    with contextlib.suppress(OSError, ValueError, RecursionError):
        data = read_bounded(os.path.join(run_dir, SUMMARY_NAME))
        tail = _TAIL.search(data)
        if not data.startswith(_HEAD) or tail is None:
            return None
        raw = data[len(_HEAD):tail.start()]
        if sha256_hex(raw) != tail.group(1).decode():
            return None
        body = load_json(data=raw, where=SUMMARY_NAME)
        return body if isinstance(body, dict) else None
    return None
