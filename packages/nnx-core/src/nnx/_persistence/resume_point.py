"""Resume points (spec §14.3): a checkpoint, its generation's sidecar, and a manifest.

Saving tag ``T`` as generation ``g``:

1. the training state goes to ``T.pt.opt.<g>.pt``, flushed to stable
   storage and renamed in;
2. the manifest naming both files with their SHA-256 digests (computed from
   the bytes as they are written, never by reading back), the generation,
   the checkpoint id and the logical position is staged as
   ``T.pt.manifest.json.staged``;
3. the compatibility copy ``T.pt.opt.pt`` is pointed at the new sidecar, the
   checkpoint ``T.pt`` is published, then the manifest is made live and the
   directory flushed. A Ctrl-C inside 2–3 is held until the point is complete;
4. every sidecar and compatibility temp no manifest names is removed.

A point saved right after another tag's point of the same state (BEST, or a
phase checkpoint, committed in the epoch LAST just committed) takes that
point's training state as it is: its sidecar is a hard link of the other
point's (same bytes, same digest, already flushed), so the state is neither
serialized nor flushed twice, and the point carries the other point's
generation and checkpoint id, which the sidecar records. Its checkpoint file
and its manifest are its own. Where the filesystem has no hard links, or the
generation would not advance, the point is written as any other.

So a crash leaves either the previous complete point, or a staged manifest
that matches every new file (verification accepts it), never new weights
paired with stale optimizer state. The compatibility copy changes only while a
staged manifest exists, so it always equals the sidecar of the live point or of
the staged one being published; the next save settles it.

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
import hashlib
import json
import os
import re
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nnx._foundation.atomic import atomic_write_bytes, fsync_dir, interrupts_held, serialized
from nnx._foundation.bounded import load_json
from nnx._foundation.hashing import sha256_hex
from nnx._foundation.locking import file_lock
from nnx._foundation.safe_paths import check_inside, is_link
from nnx._foundation.validation import check_run_id
from nnx._persistence.checkpoint_format import encode_checkpoint, read_record

__all__ = ["MANIFEST_FORMAT", "ResumePoint", "ResumePointError", "check_held", "read_point",
           "read_verified", "repair_point", "settle_staged", "stray_files", "verify_point",
           "write_point"]

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


def _staged_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".manifest.json.staged")


def lock_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".lock")


_ROLES = ("checkpoint", "sidecar")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _parse(path: Path, staged: bool) -> ResumePoint:
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
                               f"{unknown[0]!r} (a point has a checkpoint and a sidecar)")
    if "checkpoint" not in files:
        raise ResumePointError("torn", f"{path.name} lists no checkpoint file")
    for role, entry in files.items():
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


def compat_path(checkpoint: Path) -> Path:
    return checkpoint.with_name(checkpoint.name + ".opt.pt")


def _record(checkpoint: Path) -> Mapping[str, Any]:
    try:
        return read_record(checkpoint)
    except Exception as exc:  # any failure to read it safely: the file cannot be trusted
        raise ResumePointError("corrupted", f"{checkpoint.name} is unreadable ({exc})") from None


def _unmanifested(checkpoint: Path) -> None:
    """No manifest at all: a checkpoint from before manifests (None), or one whose manifest
    was lost (torn: deleting the manifest must not switch verification off)."""
    record = _record(checkpoint)
    if record.get("generation") is not None or record.get("checkpoint_id") is not None:
        raise ResumePointError("torn", f"{checkpoint.name} records generation "
                               f"{record.get('generation')} but its manifest "
                               f"{manifest_path(checkpoint).name} is missing")


def _own(checkpoint: Path, name: str) -> Path:
    """The file ``name`` beside ``checkpoint``, refused (UnsafePathError naming the link)
    when it is a symbolic link: a point's files are its directory's own, so verification
    never reads or hashes anything elsewhere."""
    return check_inside(checkpoint.parent, checkpoint.parent / name)


def read_point(checkpoint: Path) -> ResumePoint | None:
    """The live manifest of ``checkpoint``; None for a checkpoint written before manifests."""
    live = manifest_path(checkpoint)
    if live.is_file() or is_link(live):
        return _parse(live, staged=False)
    if _own(checkpoint, checkpoint.name).is_file() and not _staged_path(checkpoint).is_file():
        _unmanifested(checkpoint)  # a staged one is a publish under way: no live one yet
    return None


def _manifest_or_none(path: Path, staged: bool) -> ResumePoint | None:
    if not path.is_file() and not is_link(path):
        return None
    with contextlib.suppress(ResumePointError):
        return _parse(path, staged)
    return None


def _digest(data: bytes) -> dict[str, Any]:
    return {"sha256": sha256_hex(data), "size": len(data)}


def _set_compat(checkpoint: Path, sidecar: str | None) -> None:
    """Point ``<tag>.pt.opt.pt`` at ``sidecar``: a hard link when the filesystem has them
    (no second copy of the bytes), else a second atomic write; removed when the point has
    no sidecar, so it never holds a state that belongs to no point."""
    dest = compat_path(checkpoint)
    if sidecar is None:
        with contextlib.suppress(FileNotFoundError):
            dest.unlink()
        return
    source = checkpoint.with_name(sidecar)
    with contextlib.suppress(OSError):
        if os.path.samefile(source, dest):
            # Already that sidecar: renaming a link of the same file onto it does nothing
            # (POSIX rename), which would strand the link temp.
            return
    tmp = dest.with_name(f".{dest.name}.{uuid.uuid4().hex[:8]}")
    try:
        os.link(source, tmp)
        os.replace(tmp, dest)
    except OSError:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        atomic_write_bytes(dest, source.read_bytes(), strict=True)


def _settle_staged(checkpoint: Path) -> None:
    """The next save after a writer died in the publish window makes its staged manifest
    live when it matches every file (its checkpoint was published), and drops it when not
    (the live point is still the complete one). Otherwise this save would reuse the dead
    writer's generation, overwrite the sidecar its staged point names and then replace the
    staged manifest: killed in between, it would leave no point that verifies. The
    compatibility copy is put back on the surviving point before the staged manifest goes,
    so it is never left on the dropped one. Only this recovery path reads files back."""
    staged = _staged_path(checkpoint)
    if not staged.is_file():
        return
    try:
        point = _parse(staged, staged=True)
        _check(checkpoint, point)
    except ResumePointError:
        live = _manifest_or_none(manifest_path(checkpoint), staged=False)
        if live is not None or not checkpoint.is_file():
            _set_compat(checkpoint, None if live is None else live.sidecar)
        with contextlib.suppress(FileNotFoundError):
            staged.unlink()
        return
    _set_compat(checkpoint, point.sidecar)
    os.replace(staged, manifest_path(checkpoint))
    fsync_dir(checkpoint.parent, strict=True)


def _side_pattern(checkpoint: Path) -> re.Pattern[str]:
    """The generation sidecars and compatibility-link temps of one checkpoint."""
    name = re.escape(checkpoint.name)
    return re.compile(rf"^(?:{name}\.opt\.\d+\.pt|\.{name}\.opt\.pt\.[0-9a-f]{{8}})$")


def _strays(checkpoint: Path, keep: set[str]) -> list[str]:
    pattern = _side_pattern(checkpoint)
    return sorted(p.name for p in checkpoint.parent.iterdir()
                  if pattern.match(p.name) and p.name not in keep)


def _remove(directory: Path, names: list[str]) -> None:
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            (directory / name).unlink()


def stray_files(checkpoint: Path) -> list[str]:
    """Sidecars no live or staged manifest names, and stranded compatibility-link temps
    (what a kill between a publish and its clean-up leaves). Empty when no manifest
    parses: without one nothing can be called stray."""
    named = [_manifest_or_none(manifest_path(checkpoint), staged=False),
             _manifest_or_none(_staged_path(checkpoint), staged=True)]
    if all(point is None for point in named):
        return []
    return _strays(checkpoint, {p.sidecar for p in named if p is not None and p.sidecar})


def repair_point(checkpoint: Path, *, root: Path | None = None) -> list[str]:
    """Remove :func:`stray_files` of a point that verifies; the names removed. A point
    that does not verify raises ResumePointError and is left as it is (its files are the
    evidence). ``root`` as for :func:`verify_point`."""
    _before_locking(checkpoint, root)
    with file_lock(lock_path(checkpoint), root=root):
        _verified(checkpoint)
        strays = stray_files(checkpoint)
        _remove(checkpoint.parent, strays)
        if strays:
            fsync_dir(checkpoint.parent, strict=True)
        return strays


def _linked_sidecar(directory: Path, source: ResumePoint, name: str) -> bool:
    """``name`` as a hard link of ``source``'s sidecar; False where links are unavailable."""
    assert source.sidecar is not None
    target = directory / name
    with contextlib.suppress(FileNotFoundError):
        target.unlink()  # a dead writer's file of this generation: no manifest names it
    try:
        os.link(directory / source.sidecar, target)
    except OSError:
        return False
    return True


def write_point(dest: Path, payload: dict[str, Any], training_state: Mapping[str, Any] | None,
                position: Mapping[str, Any], *, like: ResumePoint | None = None) -> ResumePoint:
    """Write one resume point for ``dest`` (a ``<tag>.pt`` path) as described above.

    ``like``: a point just saved in the same directory whose sidecar holds exactly
    ``training_state`` (the caller's promise); this point then shares its sidecar.
    """
    directory = dest.parent
    with file_lock(lock_path(dest)):
        _settle_staged(dest)
        previous = None
        with contextlib.suppress(ResumePointError):
            previous = read_point(dest)
        generation = 1 if previous is None else previous.generation + 1
        checkpoint_id = uuid.uuid4().hex
        files: dict[str, Any] = {}
        shared = (like is not None and like.sidecar is not None and training_state is not None
                  and like.generation >= generation and not like.staged)
        if shared:
            assert like is not None
            generation, checkpoint_id = like.generation, like.checkpoint_id
        payload = {**payload, "generation": generation, "checkpoint_id": checkpoint_id}
        side_name = f"{dest.name}.opt.{generation}.pt"
        if shared and like is not None and _linked_sidecar(directory, like, side_name):
            files["sidecar"] = {**like.files["sidecar"], "name": side_name}
            payload["sidecar"] = side_name
        elif training_state is not None:
            state = {**training_state, "generation": generation, "checkpoint_id": checkpoint_id}
            side_bytes = serialized(lambda f: torch.save(state, f))
            atomic_write_bytes(directory / side_name, side_bytes, strict=True)
            files["sidecar"] = {"name": side_name, **_digest(side_bytes)}
            payload["sidecar"] = side_name
        checkpoint_bytes = encode_checkpoint(dest, payload)
        files["checkpoint"] = {"name": dest.name, **_digest(checkpoint_bytes)}
        manifest = {"format": MANIFEST_FORMAT, "tag": payload["tag"], "generation": generation,
                    "checkpoint_id": checkpoint_id, "position": dict(position), "files": files}
        text = json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
        side = files["sidecar"]["name"] if "sidecar" in files else None
        with interrupts_held():
            atomic_write_bytes(_staged_path(dest), text, strict=True)
            # Moved only while the staged manifest exists: a kill from here to the
            # manifest's rename leaves it on the staged point, before here on the live one.
            _set_compat(dest, side)
            atomic_write_bytes(dest, checkpoint_bytes, strict=True)
            os.replace(_staged_path(dest), manifest_path(dest))
            fsync_dir(directory, strict=True)
        # The previous generation's sidecar, and whatever an earlier killed save stranded.
        _remove(directory, _strays(dest, {side} if side else set()))
        return ResumePoint(tag=payload["tag"], generation=generation,
                           checkpoint_id=checkpoint_id, position=dict(position), files=files)


def _file_digest(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def _matches(path: Path, entry: Mapping[str, Any], held: bytes | None = None) -> bool:
    """The file's bytes are the ones the manifest recorded (size first: it costs nothing).
    ``entry`` passed :func:`_check_entry`. ``held``: the bytes a loader already read from
    ``path``, hashed instead of the file, so what it decodes is exactly what was checked."""
    found = path.stat().st_size if held is None else len(held)
    if found != entry["size"]:
        return False
    digest = _file_digest(path) if held is None else sha256_hex(held)
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


def _check(checkpoint: Path, point: ResumePoint, held: _Held | None = None) -> None:
    """Everything here reads bytes or a weights_only record: a digest mismatch is
    "corrupted" without opening the file, since whatever it now holds cannot be trusted
    to say which point it belongs to. With ``held`` (a loader's read) only the
    checkpoint's bytes are checked, as held: the sidecar is checked when it is read."""
    files = point.files if held is None else {"checkpoint": point.files["checkpoint"]}
    for role, entry in files.items():
        if not _own(checkpoint, entry["name"]).is_file():
            raise ResumePointError("torn", f"{role} {entry['name']} is missing")
    if point.files["checkpoint"]["name"] != checkpoint.name:
        raise ResumePointError("torn", f"the manifest names {point.files['checkpoint']['name']}")
    side = point.sidecar
    if side is not None and side != f"{checkpoint.name}.opt.{point.generation}.pt":
        raise ResumePointError("mixed", f"sidecar {side} is not of generation {point.generation}")
    for role, entry in files.items():
        if not _matches(_own(checkpoint, entry["name"]), entry,
                        None if held is None else held.data):
            raise ResumePointError("corrupted", f"{role} {entry['name']} does not match its "
                                   "SHA-256")
    # The checkpoint's bytes are the manifest's; does the manifest describe them?
    record = _record(checkpoint) if held is None else held.record(checkpoint)
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
    compat = _own(checkpoint, compat_path(checkpoint).name)
    if not compat.is_file():
        return
    candidates = [point, _manifest_or_none(_staged_path(checkpoint), staged=True)]
    for candidate in candidates:
        entry = None if candidate is None else candidate.files.get("sidecar")
        if entry is None:
            continue
        side = _own(checkpoint, entry["name"])
        with contextlib.suppress(OSError):
            if os.path.samefile(compat, side) or _matches(compat, entry):
                return
    raise ResumePointError("mixed", f"the compatibility copy {compat.name} is not the "
                           f"sidecar {point.sidecar} of generation {point.generation}")


def _verified(checkpoint: Path, held: _Held | None = None) -> ResumePoint | None:
    live, staged = manifest_path(checkpoint), _staged_path(checkpoint)
    if not any(path.is_file() or is_link(path) for path in (live, staged)):
        if not _own(checkpoint, checkpoint.name).is_file():
            raise ResumePointError("torn", f"{checkpoint.name} is missing")
        _unmanifested(checkpoint)
        return None
    error: ResumePointError | None = None
    for path, is_staged in ((live, False), (staged, True)):
        if not path.is_file() and not is_link(path):
            continue
        try:
            point = _parse(path, is_staged)
            _check(checkpoint, point, held)
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
    _before_locking(checkpoint, root)
    with file_lock(lock_path(checkpoint), root=root):
        return _verified(checkpoint)


def _before_locking(checkpoint: Path, root: Path | None) -> None:
    if root is not None:
        check_inside(root, checkpoint)
    if not checkpoint.parent.is_dir():
        raise ResumePointError("torn", f"{checkpoint.name} is missing (no directory "
                               f"{checkpoint.parent.as_posix()})")


def settle_staged(checkpoint: Path) -> str | None:
    """A staged manifest a dead writer left, settled as the tag's next save would
    (:func:`_settle_staged`), for ``nnx runs verify --repair`` and a resume's clean-up:
    ``"made live"`` when it matches every file (the publish it began completed),
    ``"removed"`` when the live point verifies without it. The sidecar the settled point
    no longer names (the older generation's, or the dropped publish's) goes with it, as
    the save would have removed it, so one repair leaves no optimizer-sized orphan
    (the outcome then names it: ``"made live; removed <sidecar>"``). A point neither
    manifest verifies is left as it is (its files are the evidence): None, as without one.
    A tag's first publish killed before its checkpoint landed (a staged manifest, no live
    one, no checkpoint file) is no point at all: its staged manifest and sidecar go."""
    with file_lock(lock_path(checkpoint)):
        if not _staged_path(checkpoint).is_file():
            return None
        never_published = not (checkpoint.is_file() or os.path.lexists(manifest_path(checkpoint)))
        try:
            point = _verified(checkpoint)
        except ResumePointError:
            if not never_published:
                return None
            point = None
        outcome = "made live" if point is not None and point.staged else "removed"
        _settle_staged(checkpoint)
        # With no manifest left, stray_files names nothing: every sidecar is unnamed.
        strays = _strays(checkpoint, set()) if never_published and point is None else (
            stray_files(checkpoint))
        _remove(checkpoint.parent, strays)
        if strays:
            fsync_dir(checkpoint.parent, strict=True)
            outcome += f"; removed {', '.join(strays)}"
        return outcome


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
            point = _verified(checkpoint, held)
        except ResumePointError as exc:
            raise ResumePointError(exc.kind, exc.detail, path=checkpoint) from None
    return held.payload(), point


def _has_manifest(checkpoint: Path) -> bool:
    return manifest_path(checkpoint).is_file() or _staged_path(checkpoint).is_file()


def check_held(checkpoint: Path, point: ResumePoint, role: str, data: bytes) -> None:
    """Refuse (ResumePointError, corrupted, naming the checkpoint) ``data``, the bytes a
    loader read of ``role``'s file, unless they are the ones ``point`` vouches for."""
    entry = point.files.get(role)
    if entry is None:
        raise ResumePointError("torn", f"the manifest lists no {role}", path=checkpoint)
    if not _matches(checkpoint.with_name(str(entry["name"])), entry, data):
        raise ResumePointError("corrupted", f"{role} {entry['name']} does not match its "
                               "SHA-256", path=checkpoint)
