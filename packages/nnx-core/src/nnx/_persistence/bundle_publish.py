"""Publishing a run bundle's generation (spec §22, Publication and Directory safety).

A new generation directory is written first (each payload through the one
atomic writer, hashed as it is written), then checked as validate_bundle would
check it once live (the listing and sizes on disk, the rest on the bytes just
written, never read back); its manifest is staged beside bundle.json under a
temp name readers ignore; the payloads, the generation directory and that temp
are flushed (at once), and only then does the temp's rename, flushed with the
bundle's directory, make bundle.json name the new generation. An export
interrupted at any of those steps leaves the previous manifest, and with it the
previous generation, in place. The generation a new one replaces stays until
the next export, so a reader that started before it can finish; older
generations and an interrupted export's leftovers are cleared when an export
starts. An interrupted first export leaves no bundle.json, only generation
directories (holding payloads or the writer's temps) and manifest temps: such a
directory is an unfinished bundle, and the next export clears it. Any other
directory that is neither empty nor a run bundle, or whose bundle.json is not a
readable NNx manifest, is refused before anything in it changes.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from nnx._foundation.atomic import atomic_write_bytes, fsync_dir, fsync_together
from nnx._foundation.hashing import sha256_hex
from nnx._persistence.bundle_format import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    CALIBRATOR,
    MANIFEST,
    MANIFEST_TEMP,
    PAYLOAD_NAMES,
    BundleExportError,
    BundleValidationError,
    generation_dir,
    is_generation_name,
)

__all__ = ["check_target", "manifest_bytes", "publish_generation"]

#: The atomic writer's temp of a payload: ``.<payload>.<8 hex>``.
PAYLOAD_TEMP = re.compile(r"\.(.+)\.[0-9a-f]{8}")


def check_target(root: Path, read_manifest: Callable[[Path], Any]) -> str | None:
    """Refuse (BundleExportError) a target that is neither absent, empty nor a run
    bundle with a readable manifest; the live generation id, or None for a new bundle."""
    if os.path.lexists(root):
        if not stat.S_ISDIR(os.lstat(root).st_mode):
            raise BundleExportError(f"{root.as_posix()} exists and is not a directory; an export "
                                    "writes only into an empty directory or a run bundle")
    else:
        return None
    names = [entry.name for entry in os.scandir(root)]
    if not names:
        return None
    if MANIFEST not in names:
        if _unfinished(root):
            return None  # an interrupted first export: publish_generation clears it
        raise BundleExportError(f"{root.as_posix()} is neither empty nor a run bundle (no "
                                f"{MANIFEST}); nothing was written")
    try:
        manifest = read_manifest(root)
    except (BundleValidationError, ValueError, OSError) as exc:
        raise BundleExportError(f"{root / MANIFEST} is not a readable NNx run bundle manifest "
                                f"({exc}); nothing was written") from None
    foreign = [n for n in names if n != MANIFEST and not is_generation_name(n)
               and not MANIFEST_TEMP.fullmatch(n)]
    if foreign:
        raise BundleExportError(f"{root.as_posix()} holds {sorted(foreign)[:5]}, which no run "
                                "bundle holds; nothing was written")
    generation: str = manifest["generation"]
    return generation


def _unfinished(root: Path) -> bool:
    """Whether ``root`` holds only what an interrupted first export leaves: manifest
    temps and generation directories of payloads or payload temps, nothing symlinked."""
    for entry in os.scandir(root):
        if entry.is_symlink():
            return False
        if MANIFEST_TEMP.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            continue
        if not (is_generation_name(entry.name) and entry.is_dir(follow_symlinks=False)):
            return False
        for inner in os.scandir(entry.path):
            temp = PAYLOAD_TEMP.fullmatch(inner.name)
            name = inner.name if temp is None else temp.group(1)
            if (inner.is_symlink() or not inner.is_file(follow_symlinks=False)
                    or (name not in PAYLOAD_NAMES and not CALIBRATOR.fullmatch(name))):
                return False
    return True


def manifest_bytes(generation: str, entries: Mapping[str, Mapping[str, Any]]
                   ) -> tuple[dict[str, Any], bytes]:
    """The manifest of ``generation`` listing ``entries`` (name → its sha256 and size,
    as :func:`write_payload` returns them), and its bytes."""
    folder = generation_dir(generation)
    manifest = {"format": BUNDLE_FORMAT, "version": BUNDLE_VERSION, "generation": generation,
                "files": {f"{folder}/{name}": dict(entry)
                          for name, entry in sorted(entries.items())}}
    return manifest, json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")


def _clear(root: Path, keep: str | None) -> None:
    """Older generations and an interrupted export's leftovers: every generation
    directory but the live one, and stranded manifest temps."""
    for entry in os.scandir(root):
        if is_generation_name(entry.name) and entry.name != keep:
            if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                os.unlink(entry.path)
            else:
                shutil.rmtree(entry.path)
        elif MANIFEST_TEMP.fullmatch(entry.name):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)


def write_payload(folder: Path, name: str, data: bytes) -> dict[str, Any]:
    """Write payload ``name`` into the staged generation, unflushed (publish_generation
    flushes them all before the manifest names them); its manifest entry, hashed from
    the bytes as they are written (the file is never read back to hash it)."""
    entry = {"sha256": sha256_hex(data), "size": len(data)}
    atomic_write_bytes(folder / name, data, sync=False, follow=False)
    return entry


def stage_manifest(root: Path, data: bytes) -> Path:
    """bundle.json's new bytes under a temp name of its own (``.bundle.json.<8 hex>``,
    which readers ignore and the next export clears), written and not yet flushed."""
    temp = root / f".{MANIFEST}.{secrets.token_hex(4)}"
    return atomic_write_bytes(temp, data, sync=False, follow=False,
                              temp=f".{MANIFEST}.{secrets.token_hex(4)}")


def replace_manifest(root: Path, staged: Path) -> None:
    """Make the staged manifest (flushed by now) bundle.json, and flush the rename."""
    os.replace(staged, root / MANIFEST)
    fsync_dir(root)


def publish_generation(root: Path, generation: str, files: Mapping[str, bytes],
                       live: str | None,
                       check_staged: Callable[[Path, Mapping[str, Any]], Any]) -> Any:
    """Stage ``files`` as generation ``generation`` under ``root``, check it with
    ``check_staged(root, manifest)``, then publish its manifest; what the check returned.
    ``live``: the generation the target holds now (kept: a reader may still be reading
    it). Each payload is hashed once, as it is written; the check gets the manifest made
    from those digests (and may check ``files`` themselves: they are the bytes written)."""
    root.mkdir(parents=True, exist_ok=True)
    _clear(root, None if live is None else generation_dir(live))
    folder = root / generation_dir(generation)
    folder.mkdir()
    entries = {name: write_payload(folder, name, data) for name, data in sorted(files.items())}
    manifest, data = manifest_bytes(generation, entries)
    checked = check_staged(root, manifest)
    staged = stage_manifest(root, data)
    # Every payload, the generation's entries and the new manifest reach stable storage
    # before the rename makes it bundle.json (the same flushes as one after another;
    # nothing names any of them until then, so they run at once: one flush's wait).
    fsync_together([*(folder / name for name in entries), staged], [folder])
    replace_manifest(root, staged)
    return checked
