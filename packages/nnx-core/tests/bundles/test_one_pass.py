"""One pass over a bundle's bytes (issue 38): an export hashes each payload once, as it
writes it, and never reads back a file it wrote (its staged check runs on the bytes it
wrote, the listing and sizes on disk); a reconstruct reads, hashes and parses the header
of each payload once. Counted, not timed: every ``open`` the process makes (an audit
hook) and every SHA-256 digest it produces."""

from __future__ import annotations

import collections
import hashlib
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from _support.bundles import StandInCalibrator, live_generation, train

from nnx._foundation import atomic
from nnx._persistence import bundle_publish
from nnx._persistence import safetensors_codec as codec
from nnx.bundles import (
    BundleValidationError,
    export_bundle,
    reconstruct_bundle,
    validate_bundle,
)

#: The opens of the call being recorded (None: not recording). One hook per process:
#: an audit hook cannot be removed, so it records only while a test asks it to.
_OPENS: list[tuple[str, int]] | None = None


def _audit(event: str, args: tuple[Any, ...]) -> None:
    # A file opened only to flush what was just written to it (fsync_file) is not read.
    if (_OPENS is not None and event == "open" and isinstance(args[0], (str, os.PathLike))
            and sys._getframe(1).f_code is not atomic.fsync_file.__code__):
        _OPENS.append((os.fspath(args[0]), args[2]))


sys.addaudithook(_audit)


def _bundle_file(path: str, target: Path) -> str | None:
    """The bundle file ``path`` names (a payload or the manifest under ``target``, or a
    bare name: a payload opened relative to its generation directory), else None."""
    name = os.path.basename(path)
    inside = os.path.dirname(path) == "" or path.startswith(os.fspath(target) + os.sep)
    return name if inside and name.endswith((".safetensors", ".json")) else None


def _reads(call: Any, target: Path) -> collections.Counter[str]:
    """How many times ``call()`` opened each file of the bundle at ``target`` to read it."""
    global _OPENS
    _OPENS = []
    try:
        call()
        opens = _OPENS
    finally:
        _OPENS = None
    directory = getattr(os, "O_DIRECTORY", 0)
    return collections.Counter(
        name for path, flags in opens
        if (name := _bundle_file(path, target)) is not None
        and flags & os.O_ACCMODE == os.O_RDONLY and not flags & directory)


class _Digests:
    """hashlib.sha256, recording each hex digest it hands out."""

    def __init__(self) -> None:
        self.seen: collections.Counter[str] = collections.Counter()
        self._sha256 = hashlib.sha256

    def __call__(self, data: bytes = b"", **kwargs: Any) -> Any:
        return _Counted(self, self._sha256(data, **kwargs))


class _Counted:
    def __init__(self, owner: _Digests, inner: Any) -> None:
        self._owner, self._inner = owner, inner

    def update(self, data: Any) -> None:
        self._inner.update(data)

    def hexdigest(self) -> str:
        digest: str = self._inner.hexdigest()
        self._owner.seen[digest] += 1
        return digest


@pytest.fixture(scope="module")
def run_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return train(root), root


def _export(run_root, target):
    run, root = run_root
    return export_bundle(run.id, target, root=root,
                         calibrators=[StandInCalibrator([0, 1, 2], None)])


def _payload_digests(info) -> dict[str, str]:
    return {rel.split("/", 1)[1]: entry["sha256"] for rel, entry in info.files.items()}


def test_an_export_reads_back_nothing_it_wrote(run_root, tmp_path):
    target = tmp_path / "b"
    assert _reads(lambda: _export(run_root, target), target) == {}
    # Into a bundle: only the live manifest, read once (directory safety), is opened.
    assert _reads(lambda: _export(run_root, target), target) == {"bundle.json": 1}
    # What it returns, from the bytes it wrote, is what a reader of the bundle finds.
    info = _export(run_root, target)
    assert validate_bundle(target) == info


def test_an_export_hashes_each_payload_once(run_root, tmp_path, monkeypatch):
    digests = _Digests()
    monkeypatch.setattr(hashlib, "sha256", digests)
    info = _export(run_root, tmp_path / "b")
    monkeypatch.undo()
    payloads = _payload_digests(info)
    assert sorted(payloads) == ["calibrator-0.json", "model.safetensors", "state.json",
                                "training.safetensors"]
    assert {name: digests.seen[d] for name, d in payloads.items()} == dict.fromkeys(payloads, 1)


def test_a_reconstruct_reads_hashes_and_parses_each_payload_once(run_root, tmp_path,
                                                                 monkeypatch):
    info = _export(run_root, tmp_path / "b")
    digests = _Digests()
    monkeypatch.setattr(hashlib, "sha256", digests)
    headers: collections.Counter[str] = collections.Counter()
    read_header = codec.read_header

    def counted(data, where):
        headers[where.rsplit("/", 1)[-1]] += 1
        return read_header(data, where)

    monkeypatch.setattr(codec, "read_header", counted)
    reads = _reads(lambda: reconstruct_bundle(tmp_path / "b"), tmp_path / "b")
    monkeypatch.undo()
    payloads = _payload_digests(info)
    assert reads == {"bundle.json": 1, **dict.fromkeys(payloads, 1)}
    assert {name: digests.seen[d] for name, d in payloads.items()} == dict.fromkeys(payloads, 1)
    assert headers == {"model.safetensors": 1, "training.safetensors": 1}


def _staged_then(change):
    """write_payload that, after the last payload, changes the staged generation."""
    original = bundle_publish.write_payload
    written = []

    def write(folder, name, data):
        entry = original(folder, name, data)
        written.append(name)
        if len(written) == 4:  # state, model, training, calibrator-0: all staged
            change(folder)
        return entry

    return write


@pytest.mark.parametrize("change", ["unlisted file", "truncated payload", "symlinked payload"])
def test_the_staged_check_still_checks_the_files_on_disk(run_root, tmp_path, monkeypatch,
                                                         change):
    target = tmp_path / "b"
    previous = _export(run_root, target)

    def alter(folder):
        if change == "unlisted file":
            (folder / "notes.txt").write_text("mine")
        elif change == "truncated payload":
            with open(folder / "model.safetensors", "r+b") as handle:
                handle.truncate(16)
        else:
            os.replace(folder / "state.json", tmp_path / "elsewhere.json")
            os.symlink(tmp_path / "elsewhere.json", folder / "state.json")

    monkeypatch.setattr(bundle_publish, "write_payload", _staged_then(alter))
    with pytest.raises(BundleValidationError):
        _export(run_root, target)
    monkeypatch.undo()
    assert validate_bundle(target).generation == previous.generation
    assert live_generation(target).name == f"g-{previous.generation}"


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="names a descriptor via /proc")
def test_every_payload_and_its_directory_are_flushed_before_the_manifest_names_them(
        run_root, tmp_path, monkeypatch):
    # The flushes run at once now; what they guarantee is unchanged: the staged
    # generation and the new manifest's bytes are on stable storage before the rename
    # that makes them bundle.json, and the rename is flushed after (spec §22
    # Publication, §14.3).
    target = tmp_path / "b"
    events: list[str] = []
    flush, replace = atomic._fsync, bundle_publish.replace_manifest

    def recorded(fd, **kwargs):
        path = os.readlink(f"/proc/self/fd/{fd}")
        name = os.path.basename(path)
        temp = bundle_publish.PAYLOAD_TEMP.fullmatch(name)  # a temp flushed before its rename
        events.append(os.path.relpath(os.path.join(os.path.dirname(path),
                                                   temp.group(1) if temp else name), target))
        return flush(fd, **kwargs)

    def publish(root, data):
        events.append("<publish>")
        return replace(root, data)

    monkeypatch.setattr(atomic, "_fsync", recorded)
    monkeypatch.setattr(bundle_publish, "replace_manifest", publish)
    info = _export(run_root, target)
    monkeypatch.undo()
    folder = f"g-{info.generation}"
    # The payloads, their directory and the new manifest (its temp) before the rename
    # that publishes it, the bundle's directory (the rename) after.
    staged = {folder, "bundle.json", *(os.path.join(folder, name)
                                       for name in _payload_digests(info))}
    cut = events.index("<publish>")
    assert set(events[:cut]) == staged and len(events[:cut]) == len(staged)
    assert events[cut + 1:] == ["."]
