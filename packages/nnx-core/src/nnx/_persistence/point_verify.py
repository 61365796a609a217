"""Verifying a resume point (spec §14.3) against the files its manifest names.

Verification reads; it writes nothing but the checkpoint's lock file, and it
never unpickles: digests are compared on raw bytes, and the checkpoint's own
record of its identity is read with ``torch.load(weights_only=True)`` (or a
safetensors header).

Loaders verify through the same check (:func:`read_verified`, :func:`check_held`):
a file's bytes are read once and hashed as held, so what a loader decodes is
exactly what the manifest vouches for; a file without any manifest is decoded
unverified, as loaders always did.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from nnx._foundation.hashing import file_sha256, sha256_hex
from nnx._foundation.locking import file_lock
from nnx._foundation.safe_paths import check_inside, is_link
from nnx._persistence.optimizer_shards import check_shards, shards_name
from nnx._persistence.point_manifest import (
    SHARDS,
    ResumePoint,
    ResumePointError,
    check_unmanifested,
    checkpoint_record,
    compat_path,
    lock_path,
    manifest_or_none,
    manifest_path,
    own_file,
    parse_manifest,
    staged_path,
)

__all__ = ["before_locking", "check_held", "check_point", "read_verified", "verified",
           "verify_point"]


def _matches(path: Path, entry: Mapping[str, Any], held: bytes | None = None) -> bool:
    """The file's bytes are the ones the manifest recorded (size first: it costs nothing).
    ``entry`` passed :func:`parse_manifest`. ``held``: the bytes a loader already read from
    ``path``, hashed instead of the file, so what it decodes is exactly what was checked."""
    found = path.stat().st_size if held is None else len(held)
    if found != entry["size"]:
        return False
    digest = file_sha256(path) if held is None else sha256_hex(held)
    return digest == str(entry["sha256"])


class _Held:
    """What a loader read of a point: the checkpoint's bytes, and the payload they decode
    to (decoded at most once, and only after their digest matched)."""

    def __init__(self, data: bytes, decode: Callable[[bytes], Any]) -> None:
        self.data, self._decode, self._payload = data, decode, None

    def payload(self) -> Any:
        if self._payload is None:
            self._payload = self._decode(self.data)
        return self._payload

    def record(self, checkpoint: Path) -> Mapping[str, Any]:
        payload = self.payload()
        if not isinstance(payload, Mapping):
            raise ResumePointError("corrupted", f"{checkpoint.name} holds no NNx checkpoint "
                                   "payload")
        return payload


def check_point(checkpoint: Path, point: ResumePoint, held: _Held | None = None) -> None:
    """Everything here reads bytes or a weights_only record: a digest mismatch is
    "corrupted" without opening the file, since whatever it now holds cannot be trusted
    to say which point it belongs to. With ``held`` (a loader's read) only the
    checkpoint's bytes are checked, as held: the sidecar is checked when it is read."""
    files = point.files if held is None else {"checkpoint": point.files["checkpoint"]}
    shards = files.get(SHARDS)  # a directory of files: checked file by file, below
    files = {role: entry for role, entry in files.items() if role != SHARDS}
    for role, entry in files.items():
        if not own_file(checkpoint, entry["name"]).is_file():
            raise ResumePointError("torn", f"{role} {entry['name']} is missing")
    if point.files["checkpoint"]["name"] != checkpoint.name:
        raise ResumePointError("torn", f"the manifest names {point.files['checkpoint']['name']}")
    side = point.sidecar
    if side is not None and side != f"{checkpoint.name}.opt.{point.generation}.pt":
        raise ResumePointError("mixed", f"sidecar {side} is not of generation {point.generation}")
    for role, entry in files.items():
        if not _matches(own_file(checkpoint, entry["name"]), entry,
                        None if held is None else held.data):
            raise ResumePointError("corrupted", f"{role} {entry['name']} does not match its "
                                   "SHA-256")
    if shards is not None:
        if shards["name"] != shards_name(checkpoint.name, point.generation):
            raise ResumePointError("mixed", f"optimizer shards {shards['name']} are not of "
                                   f"generation {point.generation}")
        check_shards(checkpoint, shards)
    # The checkpoint's bytes are the manifest's; does the manifest describe them?
    record = checkpoint_record(checkpoint) if held is None else held.record(checkpoint)
    found = (record.get("generation"), record.get("checkpoint_id"))
    if found != (point.generation, point.checkpoint_id):
        raise ResumePointError("torn", f"the manifest names checkpoint {point.checkpoint_id} "
                               f"(generation {point.generation}), {checkpoint.name} is "
                               f"{found[1]} (generation {found[0]})")
    if record.get("sidecar") != side:
        raise ResumePointError("mixed", f"{checkpoint.name} names sidecar "
                               f"{record.get('sidecar')}, the manifest {side}")


def _check_compat(checkpoint: Path, point: ResumePoint) -> None:
    """The compatibility copy equals the point's sidecar, or (while a publish is under way)
    the staged point's; with no sidecar there is none."""
    compat = own_file(checkpoint, compat_path(checkpoint).name)
    if not compat.is_file():
        return
    candidates = [point, manifest_or_none(staged_path(checkpoint), staged=True)]
    for candidate in candidates:
        entry = None if candidate is None else candidate.files.get("sidecar")
        if entry is None:
            continue
        side = own_file(checkpoint, entry["name"])
        with contextlib.suppress(OSError):
            if os.path.samefile(compat, side) or _matches(compat, entry):
                return
    raise ResumePointError("mixed", f"the compatibility copy {compat.name} is not the "
                           f"sidecar {point.sidecar} of generation {point.generation}")


def verified(checkpoint: Path, held: _Held | None = None) -> ResumePoint | None:
    live, staged = manifest_path(checkpoint), staged_path(checkpoint)
    if not any(path.is_file() or is_link(path) for path in (live, staged)):
        if not own_file(checkpoint, checkpoint.name).is_file():
            raise ResumePointError("torn", f"{checkpoint.name} is missing")
        check_unmanifested(checkpoint)
        return None
    error: ResumePointError | None = None
    for path, is_staged in ((live, False), (staged, True)):
        if not path.is_file() and not is_link(path):
            continue
        try:
            point = parse_manifest(path, is_staged)
            check_point(checkpoint, point, held)
        except ResumePointError as exc:
            error = error or exc
            continue
        if held is None:  # a loader reads no compatibility copy
            _check_compat(checkpoint, point)
        return point
    assert error is not None
    raise error


def verify_point(checkpoint: Path, *, root: Path | None = None) -> ResumePoint | None:
    """Check a resume point; None for a checkpoint written before manifests (one whose
    payload records no generation). Nothing is unpickled.

    A live manifest that fails falls back to a staged one that matches every
    file (a writer that died inside the publish window). ``root``: the runs root the
    checkpoint lies under; no component below it may be a symbolic link
    (UnsafePathError). A checkpoint whose directory does not exist is torn before any
    lock is taken, so verifying never creates a run's directories.
    """
    before_locking(checkpoint, root)
    with file_lock(lock_path(checkpoint), root=root):
        return verified(checkpoint)


def before_locking(checkpoint: Path, root: Path | None) -> None:
    if root is not None:
        check_inside(root, checkpoint)
    if not checkpoint.parent.is_dir():
        raise ResumePointError("torn", f"{checkpoint.name} is missing (no directory "
                               f"{checkpoint.parent.as_posix()})")


@contextlib.contextmanager
def _reader_lock(checkpoint: Path) -> Iterator[None]:
    """The checkpoint's lock, as verification takes it, so a loader never reads a point
    half-published. A directory this process may not write (a read-only mount of a
    deployed model) is read without it: it cannot create the lock file there."""
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(file_lock(lock_path(checkpoint)))
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
                raise
        yield


def read_verified(checkpoint: Path, decode: Callable[[bytes | None], Any]
                  ) -> tuple[Any, ResumePoint | None]:
    """A loader's read: the checkpoint's bytes, read once under its lock, checked against
    its manifest (the live one, or a staged one that matches) when it has one, then
    decoded with ``decode`` (given those bytes; given None, it reads the file itself);
    ``(payload, point)``.

    ``point`` is None when no manifest exists (a checkpoint from before manifests, or a
    copy outside its run): it is decoded unverified, as loaders always did. A point that
    does not verify raises ResumePointError naming the checkpoint; ``decode``'s own
    errors pass through as they are, for the caller to name.
    """
    if not _has_manifest(checkpoint):  # no lock file is created beside a bare copy
        return decode(None), None
    with _reader_lock(checkpoint):
        held = _Held(checkpoint.read_bytes(), decode)
        if not _has_manifest(checkpoint):  # gone since: nothing vouches for these bytes
            return held.payload(), None
        try:
            point = verified(checkpoint, held)
        except ResumePointError as exc:
            raise ResumePointError(exc.kind, exc.detail, path=checkpoint) from None
    return held.payload(), point


def _has_manifest(checkpoint: Path) -> bool:
    return manifest_path(checkpoint).is_file() or staged_path(checkpoint).is_file()


def check_held(checkpoint: Path, point: ResumePoint, role: str, data: bytes) -> None:
    """Refuse (ResumePointError, corrupted, naming the checkpoint) ``data``, the bytes a
    loader read of ``role``'s file, unless they are the ones ``point`` vouches for."""
    entry = point.files.get(role)
    if entry is None:
        raise ResumePointError("torn", f"the manifest lists no {role}", path=checkpoint)
    if not _matches(checkpoint.with_name(str(entry["name"])), entry, data):
        raise ResumePointError("corrupted", f"{role} {entry['name']} does not match its "
                               "SHA-256", path=checkpoint)
