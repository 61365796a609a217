"""A run bundle's files on disk (spec §22): its manifest, its live generation directory
and the payloads it lists.

Every check runs on bytes: the manifest's schema (strict JSON), the directory listing
against the manifest (nothing missing, unlisted or symlinked, one generation
throughout), each payload's size (checked on the open file before it is read) and
SHA-256, taken from the bytes read, so each file is read once. An export's staged
generation is checked without reading it back (:func:`check_written`). What the bytes
mean is :mod:`nnx._persistence.bundle_read`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import load_json
from nnx._foundation.hashing import sha256_hex
from nnx._persistence.bundle_format import (
    BUNDLE_FORMAT,
    BUNDLE_VERSION,
    CALIBRATOR,
    GENERATION,
    MANIFEST,
    MANIFEST_TEMP,
    MAX_JSON_BYTES,
    MAX_MANIFEST_BYTES,
    MODEL,
    PAYLOAD_NAMES,
    STATE,
    BundleValidationError,
    generation_dir,
    is_generation_name,
    read_regular,
)

__all__ = ["MAX_TENSOR_BYTES", "check_listing", "check_written", "open_generation",
           "read_listed", "read_manifest"]

#: A tensor payload larger than this is refused before it is read.
MAX_TENSOR_BYTES = 1 << 40


def read_manifest(root: Path) -> dict[str, Any]:
    """bundle.json, read and schema-checked (BundleValidationError)."""
    data = read_regular(root / MANIFEST, None, MAX_MANIFEST_BYTES, MANIFEST)
    try:
        manifest = load_json(data=data, where=MANIFEST, max_bytes=MAX_MANIFEST_BYTES,
                             max_depth=8, strict=True)
    except ValueError as exc:
        raise BundleValidationError(str(exc)) from None
    if (not isinstance(manifest, dict) or manifest.get("format") != BUNDLE_FORMAT
            or set(manifest) != {"format", "version", "generation", "files"}):
        raise BundleValidationError(f"{root / MANIFEST} is not an NNx run bundle manifest "
                                    f"({BUNDLE_FORMAT})")
    if manifest["version"] != BUNDLE_VERSION:
        raise BundleValidationError(f"{MANIFEST}: format version {manifest['version']!r}; "
                                    f"this NNx reads version {BUNDLE_VERSION}")
    generation, files = manifest["generation"], manifest["files"]
    if not isinstance(generation, str) or not GENERATION.fullmatch(generation):
        raise BundleValidationError(f"{MANIFEST}: generation {generation!r} is not 32 hex digits")
    if not isinstance(files, dict):
        raise BundleValidationError(f"{MANIFEST}: files is not a mapping")
    prefix = generation_dir(generation) + "/"
    for rel, entry in files.items():
        name = rel[len(prefix):] if rel.startswith(prefix) else None
        if name is None:
            raise BundleValidationError(f"{MANIFEST} lists {rel!r}, outside generation "
                                        f"{generation} (one generation id throughout)")
        if name not in PAYLOAD_NAMES and not CALIBRATOR.fullmatch(name):
            raise BundleValidationError(f"{MANIFEST} lists {rel!r}, not a payload of the format")
        if (not isinstance(entry, dict) or set(entry) != {"sha256", "size"}
                or not isinstance(entry["sha256"], str) or len(entry["sha256"]) != 64
                or not isinstance(entry["size"], int) or isinstance(entry["size"], bool)
                or entry["size"] < 0):
            raise BundleValidationError(f"{MANIFEST}: entry {rel!r} needs a sha256 and a size")
    for needed in (STATE, MODEL):
        if prefix + needed not in files:
            raise BundleValidationError(f"{MANIFEST} does not list {needed}")
    return manifest


#: Whether a generation directory can be held open and its payloads opened relative to
#: it (POSIX); elsewhere each payload is opened by path, its last component unfollowed.
_DIR_FD = (hasattr(os, "O_DIRECTORY") and hasattr(os, "O_NOFOLLOW")
           and {os.open, os.stat} <= os.supports_dir_fd and os.scandir in os.supports_fd)


@contextmanager
def open_generation(root: Path, generation: str) -> Iterator[int | None]:
    """The live generation directory, opened once without following a symbolic link:
    listing and every payload read go through this descriptor, so the directory cannot
    be swapped (for a link elsewhere) between the checks and the reads."""
    live = generation_dir(generation)
    try:
        info = os.lstat(root / live)
    except FileNotFoundError:
        raise BundleValidationError(f"generation directory {live} is missing") from None
    if not stat.S_ISDIR(info.st_mode):
        raise BundleValidationError(f"generation {live} is not a directory (a symbolic link?)")
    if not _DIR_FD:
        yield None
        return
    try:
        fd = os.open(root / live, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise BundleValidationError(f"generation directory {live} is missing") from None
    except OSError:  # ELOOP / ENOTDIR: swapped for a link or a file after the lstat
        raise BundleValidationError(f"generation {live} is not a directory (a symbolic "
                                    "link?)") from None
    try:
        yield fd
    finally:
        os.close(fd)


def check_listing(root: Path, manifest: Mapping[str, Any], gen_fd: int | None) -> None:
    """Top level: bundle.json and generation directories only; the live generation
    (``gen_fd``, open): exactly the listed files, each a regular file (nothing
    symlinked or unlisted)."""
    live = generation_dir(manifest["generation"])
    for entry in os.scandir(root):
        mode = entry.stat(follow_symlinks=False).st_mode
        if entry.name == MANIFEST or MANIFEST_TEMP.fullmatch(entry.name):
            continue  # a temp a killed export stranded is never read; the next export clears it
        if is_generation_name(entry.name) and stat.S_ISDIR(mode):
            continue
        raise BundleValidationError(f"{root.as_posix()} holds {entry.name!r}, which is not "
                                    "part of the bundle")
    listed = {rel.split("/", 1)[1] for rel in manifest["files"]}
    present = set()
    for entry in os.scandir(root / live if gen_fd is None else gen_fd):
        if not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
            raise BundleValidationError(f"{live}/{entry.name} is not a regular file "
                                        "(symbolic links, FIFOs and devices are refused)")
        present.add(entry.name)
    if present - listed:
        raise BundleValidationError(f"{live} holds unlisted file(s) {sorted(present - listed)}")
    if listed - present:
        raise BundleValidationError(f"{live} is missing {sorted(listed - present)}")


def _bound(name: str) -> int:
    return MAX_JSON_BYTES if name.endswith(".json") else MAX_TENSOR_BYTES


def read_listed(root: Path, manifest: Mapping[str, Any], rel: str,
                gen_fd: int | None) -> bytes:
    entry = manifest["files"][rel]
    name = rel.split("/", 1)[1]
    bound = _bound(name)
    if gen_fd is None:
        data = read_regular(root / rel, entry["size"], bound, rel)
    else:
        data = read_regular(Path(name), entry["size"], bound, rel, dir_fd=gen_fd)
    if sha256_hex(data) != entry["sha256"]:
        raise BundleValidationError(f"{rel}: its SHA-256 does not match the manifest (the "
                                    "file was changed or damaged)")
    return data


def check_written(root: Path, manifest: Mapping[str, Any], written: Mapping[str, bytes],
                  gen_fd: int | None) -> dict[str, bytes]:
    """The staged generation's payloads (name → bytes) as its export wrote them, each
    listed file checked on disk without reading it back: a regular file, not a link
    (``stat`` without following one), of the size its manifest entry and its bytes
    have, under the reader's bound. Its digest is the one the manifest was made from,
    taken as those very bytes were written (one hash pass, spec §22 and §4.2)."""
    payloads = {}
    for rel in sorted(manifest["files"]):
        name, size = rel.split("/", 1)[1], manifest["files"][rel]["size"]
        data = written.get(name)
        try:
            info = (os.stat(root / rel, follow_symlinks=False) if gen_fd is None
                    else os.stat(name, dir_fd=gen_fd, follow_symlinks=False))
        except FileNotFoundError:
            info = None
        if data is None or info is None or not stat.S_ISREG(info.st_mode):
            raise BundleValidationError(f"{rel} is missing or not a regular file")
        if not info.st_size == len(data) == size or size > _bound(name):
            raise BundleValidationError(f"{rel} is {info.st_size} bytes on disk, {len(data)} "
                                        f"written; expected {size} (at most {_bound(name)})")
        payloads[name] = data
    return payloads
