"""A resume point's manifest (spec §14.3): its file names, its shape, and reading it.

Every manifest a writer, a verifier or a loader reads goes through :func:`parse_manifest`,
so a damaged or planted one is a torn point naming the field, whichever of them finds it.
Saving a point is :mod:`nnx._persistence.resume_point`; checking one against its files,
:mod:`nnx._persistence.point_verify`.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import load_json
from nnx._foundation.safe_paths import check_inside, is_link
from nnx._foundation.validation import check_run_id
from nnx._persistence.checkpoint_format import read_record

__all__ = ["MANIFEST_FORMAT", "SHARDS", "ResumePoint", "ResumePointError", "check_unmanifested",
           "checkpoint_record", "compat_path", "lock_path", "manifest_or_none",
           "manifest_path", "own_file", "parse_manifest", "read_point", "staged_path"]

MANIFEST_FORMAT = "nnx.resume_point/1"


class ResumePointError(RuntimeError):
    """A resume point that cannot be trusted: ``kind`` is torn, mixed or corrupted.
    ``path``: the checkpoint a loader was reading, named in the message when known."""

    def __init__(self, kind: str, message: str, *, path: Path | None = None) -> None:
        where = "" if path is None else f"{path.as_posix()}: "
        super().__init__(f"{kind} resume point: {where}{message}")
        self.kind, self.detail, self.path = kind, message, path


@dataclass(frozen=True)
class ResumePoint:
    tag: str
    generation: int
    checkpoint_id: str
    position: Mapping[str, Any]
    files: Mapping[str, Mapping[str, Any]]
    staged: bool = False

    @property
    def sidecar(self) -> str | None:
        entry = self.files.get("sidecar")
        return None if entry is None else str(entry["name"])


def manifest_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".manifest.json")


def staged_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".manifest.json.staged")


def lock_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".lock")


# A sharded fit's optimizer state: a directory beside the checkpoint whose every file the
# entry lists (nnx._persistence.optimizer_shards).
SHARDS = "optimizer_shards"
_ROLES = ("checkpoint", "sidecar", SHARDS)
_SHA256 = re.compile(r"[0-9a-f]{64}")


def parse_manifest(path: Path, staged: bool) -> ResumePoint:
    """A manifest, read through the bounded reader and checked field by field, so that
    whatever a damaged or planted one holds is a torn point naming the manifest and the
    field (never a KeyError, TypeError or RecursionError). The manifest itself is never
    followed when it is a symbolic link (UnsafePathError)."""
    check_inside(path.parent, path)
    try:
        doc = load_json(path)
    except (OSError, ValueError) as exc:
        raise ResumePointError("torn", f"{path.name} is unreadable ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != MANIFEST_FORMAT:
        raise ResumePointError("torn", f"{path.name} is not a {MANIFEST_FORMAT} manifest")
    generation = doc.get("generation")
    if isinstance(generation, bool) or not isinstance(generation, int):
        raise ResumePointError("torn", f"{path.name} has no generation")
    for key, kind in (("tag", str), ("checkpoint_id", str), ("position", dict),
                      ("files", dict)):
        if not isinstance(doc.get(key), kind):
            raise ResumePointError("torn", f"{path.name} has no {key}")
    files = doc["files"]
    unknown = sorted(set(files) - set(_ROLES))
    if unknown:
        raise ResumePointError("torn", f"{path.name} lists a file of unknown role "
                               f"{unknown[0]!r} (a point has a checkpoint, a sidecar and "
                               "optimizer shards)")
    if "checkpoint" not in files:
        raise ResumePointError("torn", f"{path.name} lists no checkpoint file")
    for role, entry in files.items():
        if role == SHARDS:
            _check_shards_entry(path, entry)
        else:
            _check_entry(path, role, entry)
    return ResumePoint(tag=doc["tag"], generation=generation,
                       checkpoint_id=doc["checkpoint_id"], position=doc["position"],
                       files=files, staged=staged)


def _check_entry(manifest: Path, role: str, entry: Any) -> None:
    """One ``files`` entry: a plain file name in the checkpoint's own directory (the
    run-id rule: no separator, never absolute, not ``.`` / ``..``), a SHA-256 and a size."""
    where = f"{manifest.name} entry {role}"
    if not isinstance(entry, dict):
        raise ResumePointError("torn", f"{where} is not a mapping")
    try:
        check_run_id(f"{where} name", entry.get("name"), what="file name")
    except ValueError as exc:
        raise ResumePointError("torn", f"{exc}: a point's files lie in its own "
                               "directory") from None
    if not isinstance(entry.get("sha256"), str) or not _SHA256.fullmatch(entry["sha256"]):
        raise ResumePointError("torn", f"{where} has no sha256 (64 hexadecimal digits)")
    size = entry.get("size")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ResumePointError("torn", f"{where} has no size (a byte count)")


def _check_shards_entry(manifest: Path, entry: Any) -> None:
    """The optimizer shards: a plain directory name beside the checkpoint and, for each
    of its files, a plain name, a SHA-256 and a size."""
    where = f"{manifest.name} entry {SHARDS}"
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), dict) or not entry[
            "files"]:
        raise ResumePointError("torn", f"{where} lists no files")
    _check_entry(manifest, SHARDS, {"name": entry.get("name"), "sha256": "0" * 64, "size": 0})
    for name, digest in entry["files"].items():
        _check_entry(manifest, f"{SHARDS}/{name}", {**digest, "name": name}
                     if isinstance(digest, dict) else digest)


def compat_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".opt.pt")


def checkpoint_record(checkpoint: Path) -> Mapping[str, Any]:
    try:
        return read_record(checkpoint)
    except Exception as exc:  # any failure to read it safely: the file cannot be trusted
        raise ResumePointError("corrupted", f"{checkpoint.name} is unreadable ({exc})") from None


def check_unmanifested(checkpoint: Path) -> None:
    """No manifest at all: a checkpoint from before manifests (None), or one whose manifest
    was lost (torn: deleting the manifest must not switch verification off)."""
    record = checkpoint_record(checkpoint)
    if record.get("generation") is not None or record.get("checkpoint_id") is not None:
        raise ResumePointError("torn", f"{checkpoint.name} records generation "
                               f"{record.get('generation')} but its manifest "
                               f"{manifest_path(checkpoint).name} is missing")


def own_file(checkpoint: Path, name: str) -> Path:
    """The file ``name`` beside ``checkpoint``, refused (UnsafePathError naming the link)
    when it is a symbolic link: a point's files are its directory's own, so verification
    never reads or hashes anything elsewhere."""
    return check_inside(checkpoint.parent, checkpoint.parent / name)


def read_point(checkpoint: Path) -> ResumePoint | None:
    """The live manifest of ``checkpoint``; None for a checkpoint written before manifests."""
    live = manifest_path(checkpoint)
    if live.is_file() or is_link(live):
        return parse_manifest(live, staged=False)
    if own_file(checkpoint, checkpoint.name).is_file() and not staged_path(checkpoint).is_file():
        check_unmanifested(checkpoint)  # a staged one is a publish under way: no live one yet
    return None


def manifest_or_none(path: Path, staged: bool) -> ResumePoint | None:
    if not path.is_file() and not is_link(path):
        return None
    with contextlib.suppress(ResumePointError):
        return parse_manifest(path, staged)
    return None
