"""Resume points (spec §14.3): a checkpoint, its generation's sidecar, and a manifest.

Saving tag ``T`` as generation ``g``:

1. the training state goes to ``T.pt.opt.<g>.pt``, flushed to stable
   storage and renamed in;
2. the manifest naming both files with their SHA-256 digests (computed from
   the bytes as they are written, never by reading back), the generation,
   the checkpoint id and the logical position is staged as
   ``T.pt.manifest.json.staged``;
3. the compatibility copy ``T.pt.opt.pt`` is pointed at the new sidecar, the
   checkpoint ``T.pt`` is published, then the manifest is made live. A Ctrl-C
   inside 2–3 is held until the point is complete;
4. the directory is flushed (inside an epoch commit, once for all its points:
   :mod:`nnx._persistence.point_flush`), then every sidecar and compatibility
   temp no manifest names is removed.

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


Verification (what a crash may leave, and what a loader reads) is
:mod:`nnx._persistence.point_verify`; the manifest's shape is
:mod:`nnx._persistence.point_manifest`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from nnx._foundation.atomic import atomic_write_bytes, fsync_dir, interrupts_held, serialized
from nnx._foundation.hashing import sha256_hex
from nnx._foundation.locking import file_lock
from nnx._persistence.checkpoint_format import encode_checkpoint
from nnx._persistence.known_files import recall, remember
from nnx._persistence.optimizer_shards import (
    StagedShards,
    names_shards,
    place_shards,
    remove_tree,
    shards_name,
)
from nnx._persistence.point_flush import point_published
from nnx._persistence.point_manifest import (
    MANIFEST_FORMAT,
    SHARDS,
    ResumePoint,
    ResumePointError,
    compat_path,
    lock_path,
    manifest_or_none,
    manifest_path,
    parse_manifest,
    read_point,
    staged_path,
)
from nnx._persistence.point_verify import before_locking, check_point, verified

__all__ = ["repair_point", "settle_staged", "stray_files", "write_point"]


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
    staged = staged_path(checkpoint)
    if not staged.is_file():
        return
    try:
        point = parse_manifest(staged, staged=True)
        check_point(checkpoint, point)
    except ResumePointError:
        live = manifest_or_none(manifest_path(checkpoint), staged=False)
        if live is not None or not checkpoint.is_file():
            _set_compat(checkpoint, None if live is None else live.sidecar)
        with contextlib.suppress(FileNotFoundError):
            staged.unlink()
        return
    _set_compat(checkpoint, point.sidecar)
    os.replace(staged, manifest_path(checkpoint))
    fsync_dir(checkpoint.parent, strict=True)


def _side_pattern(checkpoint: Path) -> re.Pattern[str]:
    """The generation sidecars and optimizer-shard directories, and the compatibility-link
    temps, of one checkpoint."""
    name = re.escape(checkpoint.name)
    return re.compile(
        rf"^(?:{name}\.opt\.\d+\.(?:pt|dcp)|\.{name}\.opt\.pt\.[0-9a-f]{{8}})$")


def _strays(checkpoint: Path, keep: set[str]) -> list[str]:
    pattern = _side_pattern(checkpoint)
    return sorted(p.name for p in checkpoint.parent.iterdir()
                  if pattern.match(p.name) and p.name not in keep)


def _remove(directory: Path, names: list[str]) -> None:
    for name in names:
        path = directory / name
        if path.is_dir() and not path.is_symlink():
            remove_tree(path)  # an optimizer-shard directory
            continue
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _remove_strays(checkpoint: Path, keep: set[str]) -> None:
    """What a point published earlier in an epoch commit no longer names, removed after
    the commit's directory flush (:mod:`nnx._persistence.point_flush`)."""
    with file_lock(lock_path(checkpoint)):
        _remove(checkpoint.parent, _strays(checkpoint, keep))


def stray_files(checkpoint: Path) -> list[str]:
    """Sidecars no live or staged manifest names, and stranded compatibility-link temps
    (what a kill between a publish and its clean-up leaves). Empty when no manifest
    parses: without one nothing can be called stray."""
    named = [manifest_or_none(manifest_path(checkpoint), staged=False),
             manifest_or_none(staged_path(checkpoint), staged=True)]
    if all(point is None for point in named):
        return []
    keep = {p.sidecar for p in named if p is not None and p.sidecar}
    keep |= {str(p.files[SHARDS]["name"]) for p in named if p is not None and SHARDS in p.files}
    return _strays(checkpoint, keep)


def repair_point(checkpoint: Path, *, root: Path | None = None) -> list[str]:
    """Remove :func:`stray_files` of a point that verifies; the names removed. A point
    that does not verify raises ResumePointError and is left as it is (its files are the
    evidence). ``root`` as for
    :func:`~nnx._persistence.point_verify.verify_point`."""
    before_locking(checkpoint, root)
    with file_lock(lock_path(checkpoint), root=root):
        verified(checkpoint)
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


def _next_generation(dest: Path) -> int:
    """The generation after the live point's: the one this process published, as it
    knows it (:mod:`nnx._persistence.known_files`), or as its manifest says."""
    known = recall(manifest_path(dest))
    if known is not None:
        return int(known[0]["generation"]) + 1
    previous = None
    with contextlib.suppress(ResumePointError):
        previous = read_point(dest)
    return 1 if previous is None else previous.generation + 1


def write_point(dest: Path, payload: dict[str, Any], training_state: Mapping[str, Any] | None,
                position: Mapping[str, Any], *, like: ResumePoint | None = None,
                shards: StagedShards | None = None) -> ResumePoint:
    """Write one resume point for ``dest`` (a ``<tag>.pt`` path) as described above.

    ``like``: a point just saved in the same directory whose sidecar holds exactly
    ``training_state`` (the caller's promise); this point then shares its sidecar, and
    its optimizer shards. ``shards``: the staging directory of a sharded fit's optimizer
    state (:mod:`nnx._persistence.optimizer_shards`), which ``training_state`` marks.
    """
    if names_shards(training_state) and shards is None and (
            like is None or SHARDS not in like.files):
        raise ValueError(f"{dest.name}: the training state marks sharded optimizer state, "
                         "but no shards were given to save with it")
    directory = dest.parent
    with file_lock(lock_path(dest)):
        _settle_staged(dest)
        generation = _next_generation(dest)
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
        side_shards = like.files.get(SHARDS) if shared and like is not None else None
        if side_shards is not None or (shards is not None and training_state is not None):
            shard_dir = shards_name(dest.name, generation)
            place_shards(directory, shard_dir, shards,
                         None if side_shards is None else str(side_shards["name"]))
            files[SHARDS] = {"name": shard_dir, "files": dict(
                side_shards["files"] if side_shards is not None else shards.files)}  # type: ignore[union-attr]
        checkpoint_bytes = encode_checkpoint(dest, payload)
        files["checkpoint"] = {"name": dest.name, **_digest(checkpoint_bytes)}
        manifest = {"format": MANIFEST_FORMAT, "tag": payload["tag"], "generation": generation,
                    "checkpoint_id": checkpoint_id, "position": dict(position), "files": files}
        text = json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
        side = files["sidecar"]["name"] if "sidecar" in files else None
        with interrupts_held():
            atomic_write_bytes(staged_path(dest), text, strict=True)
            # Moved only while the staged manifest exists: a kill from here to the
            # manifest's rename leaves it on the staged point, before here on the live one.
            _set_compat(dest, side)
            atomic_write_bytes(dest, checkpoint_bytes, strict=True)
            os.replace(staged_path(dest), manifest_path(dest))
            # What the manifest says and the SHA-256 of its bytes, for this commit's later
            # steps (runs/best's score, the listing summary) to take without reading back.
            remember(manifest_path(dest), (manifest, sha256_hex(text)))
            # The directory flush, then the previous generation's sidecar and whatever an
            # earlier killed save stranded: now, or once for an epoch commit (point_flush).
            keep = {side} if side else set()
            if SHARDS in files:
                keep.add(files[SHARDS]["name"])
            flushed = point_published(directory, lambda: _remove_strays(dest, keep))
        if flushed:
            _remove(directory, _strays(dest, keep))
        return ResumePoint(tag=payload["tag"], generation=generation,
                           checkpoint_id=checkpoint_id, position=dict(position), files=files)


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
        if not staged_path(checkpoint).is_file():
            return None
        never_published = not (checkpoint.is_file() or os.path.lexists(manifest_path(checkpoint)))
        try:
            point = verified(checkpoint)
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
