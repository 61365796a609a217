"""Resume points (spec §14.3): a checkpoint, its generation's sidecar, and a manifest.

Saving tag ``T`` as generation ``g``:

1. the training state goes to ``T.pt.opt.<g>.pt`` (and the compatibility
   copy ``T.pt.opt.pt``), each flushed to stable storage and renamed in;
2. the manifest naming both files with their SHA-256 digests (computed from
   the bytes as they are written, never by reading back), the generation,
   the checkpoint id and the logical position is staged as
   ``T.pt.manifest.json.staged``;
3. the checkpoint ``T.pt`` is published, then the manifest is made live and
   the directory flushed. A Ctrl-C inside 2–3 is held until the point is
   complete;
4. the previous generation's sidecar is removed.

So a crash leaves either the previous complete point, or a staged manifest
that matches every new file (verification accepts it), never new weights
paired with stale optimizer state. Verification reads; it writes nothing but
the checkpoint's lock file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nnx._atomic import atomic_write_bytes, fsync_dir, interrupts_held, serialized
from nnx._locking import file_lock
from nnx.checkpoint_format import decode_checkpoint, encode_checkpoint

__all__ = ["MANIFEST_FORMAT", "ResumePoint", "ResumePointError", "read_point", "verify_point",
           "write_point"]

MANIFEST_FORMAT = "nnx.resume_point/1"


class ResumePointError(RuntimeError):
    """A resume point that cannot be trusted: ``kind`` is torn, mixed or corrupted."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind} resume point: {message}")
        self.kind = kind


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


def _staged_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".manifest.json.staged")


def lock_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".lock")


def _parse(path: Path, staged: bool) -> ResumePoint:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("format") != MANIFEST_FORMAT:
            raise ValueError("unknown format")
        return ResumePoint(tag=doc["tag"], generation=int(doc["generation"]),
                           checkpoint_id=doc["checkpoint_id"], position=doc["position"],
                           files=doc["files"], staged=staged)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResumePointError("torn", f"{path.name} is unreadable ({exc})") from None


def read_point(checkpoint: Path) -> ResumePoint | None:
    """The live manifest of ``checkpoint``; None for a checkpoint written before manifests."""
    live = manifest_path(checkpoint)
    return _parse(live, staged=False) if live.is_file() else None


def _digest(data: bytes) -> dict[str, Any]:
    return {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}


def _compat_copy(source: Path, dest: Path, data: bytes) -> None:
    """``<tag>.pt.opt.pt``, the current bundle under its fixed name: a hard link when the
    filesystem has them (no second copy of the bytes), else a second atomic write."""
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}")
    try:
        os.link(source, tmp)
        os.replace(tmp, dest)
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        atomic_write_bytes(dest, data, strict=True)


def _settle_staged(checkpoint: Path) -> None:
    """The next save after a writer died in the publish window makes its staged manifest
    live when it matches every file (its checkpoint was published), and drops it when not
    (the live point is still the complete one). Otherwise this save would reuse the dead
    writer's generation, overwrite the sidecar its staged point names and then replace the
    staged manifest: killed in between, it would leave no point that verifies. Only this
    recovery path reads files back."""
    staged = _staged_path(checkpoint)
    if not staged.is_file():
        return
    try:
        _check(checkpoint, _parse(staged, staged=True))
    except ResumePointError:
        with contextlib.suppress(FileNotFoundError):
            staged.unlink()
        return
    os.replace(staged, manifest_path(checkpoint))
    fsync_dir(checkpoint.parent, strict=True)


def write_point(dest: Path, payload: dict[str, Any], training_state: Mapping[str, Any] | None,
                position: Mapping[str, Any]) -> ResumePoint:
    """Write one resume point for ``dest`` (a ``<tag>.pt`` path) as described above."""
    directory = dest.parent
    with file_lock(lock_path(dest)):
        _settle_staged(dest)
        previous = None
        with contextlib.suppress(ResumePointError):
            previous = read_point(dest)
        generation = 1 if previous is None else previous.generation + 1
        checkpoint_id = uuid.uuid4().hex
        files: dict[str, Any] = {}
        payload = {**payload, "generation": generation, "checkpoint_id": checkpoint_id}
        if training_state is not None:
            side_name = f"{dest.name}.opt.{generation}.pt"
            state = {**training_state, "generation": generation, "checkpoint_id": checkpoint_id}
            side_bytes = serialized(lambda f: torch.save(state, f))
            atomic_write_bytes(directory / side_name, side_bytes, strict=True)
            _compat_copy(directory / side_name, directory / f"{dest.name}.opt.pt", side_bytes)
            files["sidecar"] = {"name": side_name, **_digest(side_bytes)}
            payload["sidecar"] = side_name
        checkpoint_bytes = encode_checkpoint(dest, payload)
        files["checkpoint"] = {"name": dest.name, **_digest(checkpoint_bytes)}
        manifest = {"format": MANIFEST_FORMAT, "tag": payload["tag"], "generation": generation,
                    "checkpoint_id": checkpoint_id, "position": dict(position), "files": files}
        text = json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
        with interrupts_held():
            atomic_write_bytes(_staged_path(dest), text, strict=True)
            atomic_write_bytes(dest, checkpoint_bytes, strict=True)
            os.replace(_staged_path(dest), manifest_path(dest))
            fsync_dir(directory, strict=True)
        if previous is not None and previous.sidecar and previous.sidecar != files.get(
                "sidecar", {}).get("name"):
            with contextlib.suppress(FileNotFoundError):
                (directory / previous.sidecar).unlink()
        return ResumePoint(tag=payload["tag"], generation=generation,
                           checkpoint_id=checkpoint_id, position=dict(position), files=files)


def _file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _check(checkpoint: Path, point: ResumePoint) -> None:
    directory = checkpoint.parent
    for role, entry in point.files.items():
        if not (directory / entry["name"]).is_file():
            raise ResumePointError("torn", f"{role} {entry['name']} is missing")
    if point.files["checkpoint"]["name"] != checkpoint.name:
        raise ResumePointError("torn", f"the manifest names {point.files['checkpoint']['name']}")
    side = point.sidecar
    if side is not None and side != f"{checkpoint.name}.opt.{point.generation}.pt":
        raise ResumePointError("mixed", f"sidecar {side} is not of generation {point.generation}")
    for role, entry in point.files.items():
        if _file_digest(directory / entry["name"]) != entry["sha256"]:
            try:
                found = (decode_checkpoint(directory / entry["name"]) if role == "checkpoint"
                         else torch.load(directory / entry["name"], weights_only=False))
                other = found.get("checkpoint_id") if isinstance(found, dict) else None
            except Exception:
                other = None
            if other is not None and other != point.checkpoint_id:
                kind = "torn" if role == "checkpoint" else "mixed"
                raise ResumePointError(kind, f"{role} {entry['name']} belongs to another "
                                       f"checkpoint ({other})")
            raise ResumePointError("corrupted", f"{role} {entry['name']} does not match its "
                                   "SHA-256")


def verify_point(checkpoint: Path) -> ResumePoint | None:
    """Check a resume point; None for a checkpoint written before manifests.

    A live manifest that fails falls back to a staged one that matches every
    file (a writer that died inside the publish window).
    """
    live, staged = manifest_path(checkpoint), _staged_path(checkpoint)
    with file_lock(lock_path(checkpoint)):
        if not live.is_file() and not staged.is_file():
            if not checkpoint.is_file():
                raise ResumePointError("torn", f"{checkpoint.name} is missing")
            return None
        error: ResumePointError | None = None
        for path, is_staged in ((live, False), (staged, True)):
            if not path.is_file():
                continue
            try:
                point = _parse(path, is_staged)
                _check(checkpoint, point)
                return point
            except ResumePointError as exc:
                error = error or exc
        assert error is not None
        raise error

