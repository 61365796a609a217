"""The atomic writer (spec §4.2): the old file or the new one, never a torn one."""

from __future__ import annotations

import os
import stat

import pytest

from nnx._foundation.atomic import atomic_write, atomic_write_text


def leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_writes_and_replaces(tmp_path):
    target = tmp_path / "run.yaml"
    atomic_write_text(target, "a: 1\n")
    atomic_write_text(target, "a: 2\n")
    assert target.read_text() == "a: 2\n"
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_a_failed_write_keeps_the_previous_file_and_removes_its_temp(tmp_path, error):
    target = tmp_path / "idps.csv"
    atomic_write_text(target, "old\n")

    def explode(handle):
        handle.write(b"half of the new con")
        raise error

    with pytest.raises(type(error)):
        atomic_write(target, explode)
    assert target.read_text() == "old\n"
    assert leftovers(tmp_path) == []


def test_a_failed_rename_removes_the_temp_and_reraises(tmp_path):
    target = tmp_path / "blocker"
    target.mkdir()
    (target / "inside").write_text("x")  # os.replace onto a non-empty directory fails
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert leftovers(tmp_path) == []


def test_temp_lives_beside_the_resolved_destination(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    seen = []

    def spy(handle):
        seen.append(leftovers(real))  # the temp, while it is being written
        handle.write(b"x")

    atomic_write(link / "file.txt", spy)
    assert len(seen[0]) == 1 and seen[0][0].startswith(".file.txt.")
    assert (real / "file.txt").read_text() == "x" and leftovers(real) == []


def test_bare_filename_in_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    atomic_write_text("plain.txt", "ok")
    assert (tmp_path / "plain.txt").read_text() == "ok"


def test_new_files_follow_the_umask(tmp_path):
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "f", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o644


def test_a_full_disk_names_the_destination_keeps_the_errno_and_the_previous_file(
        tmp_path, monkeypatch):
    import errno

    import nnx._foundation.atomic as atomic

    target = tmp_path / "run.yaml"
    atomic_write_text(target, "old\n")
    real_write = os.write

    def full(fd, data):  # the disk fills up while the temp is being written
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(atomic.os, "write", full)
    with pytest.raises(OSError) as caught:
        atomic.append_at(tmp_path / "journal.bin", 0, b"abc")
    assert caught.value.errno == errno.ENOSPC
    assert caught.value.filename == str(tmp_path / "journal.bin")
    monkeypatch.setattr(atomic.os, "write", real_write)

    def filling(handle):
        handle.write(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OSError, match=r"No space left on device while writing") as caught:
        atomic_write(target, filling)
    assert caught.value.errno == errno.ENOSPC and type(caught.value) is OSError
    assert caught.value.filename == str(target.resolve())
    assert str(target.resolve()) in str(caught.value)
    assert target.read_text() == "old\n" and leftovers(tmp_path) == []


def test_a_missing_directory_names_the_destination_not_the_temp(tmp_path):
    target = tmp_path / "gone" / "metadata.yaml"
    with pytest.raises(FileNotFoundError) as caught:
        atomic_write_text(target, "x")
    assert caught.value.filename == str(target) and ".metadata.yaml." not in str(caught.value)


def test_an_error_about_another_file_is_passed_through_unchanged(tmp_path):
    source = tmp_path / "missing-source"

    def copy(handle):
        handle.write(source.read_bytes())

    with pytest.raises(FileNotFoundError) as caught:
        atomic_write(tmp_path / "copy", copy)
    assert caught.value.filename == str(source)
    assert leftovers(tmp_path) == []


def test_reclaim_removes_only_the_destinations_stranded_temps(tmp_path):
    """``reclaim=True`` (issue 36 item 3): the ``.<name>.<8 hex>`` files a killed writer of
    the same destination left go; another file's temp, a link and other names stay."""
    dest = tmp_path / "teacher.jsonl"
    stranded = tmp_path / ".teacher.jsonl.0123abcd"
    stranded.write_text("half")
    kept = [tmp_path / ".other.jsonl.0123abcd", tmp_path / ".teacher.jsonl.notes"]
    for path in kept:
        path.write_text("kept")
    target = tmp_path / "target.txt"
    target.write_text("kept")
    link = tmp_path / ".teacher.jsonl.89abcdef"
    link.symlink_to(target)
    atomic_write_text(dest, "new\n", reclaim=True)
    assert dest.read_text() == "new\n" and not stranded.exists()
    assert all(path.read_text() == "kept" for path in [*kept, target]) and link.is_symlink()


def _flushes(monkeypatch) -> list[tuple[str, str]]:
    """(call, "dir" / "file") of every flush the atomic helpers make."""
    import nnx._foundation.atomic as atomic_module

    calls: list[tuple[str, str]] = []
    for name in ("fsync", "fdatasync"):
        if hasattr(os, name):
            original = getattr(os, name)

            def flush(fd, _name=name, _original=original):
                kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
                calls.append((_name, kind))
                return _original(fd)

            monkeypatch.setattr(os, name, flush)
    monkeypatch.setattr(atomic_module, "fcntl", None)  # the non-macOS branch everywhere
    return calls


@pytest.mark.skipif(not hasattr(os, "fdatasync"), reason="no fdatasync (macOS, Windows)")
def test_file_data_takes_fdatasync_a_directory_fsync(tmp_path, monkeypatch):
    from nnx._foundation.atomic import append_at, fsync_dir, fsync_file

    calls = _flushes(monkeypatch)
    atomic_write_text(tmp_path / "a.txt", "x")
    append_at(tmp_path / "b.log", 0, b"y")
    fsync_file(tmp_path / "a.txt")
    fsync_dir(tmp_path)
    assert calls == [("fdatasync", "file")] * 3 + [("fsync", "dir")]


@pytest.mark.skipif(not hasattr(os, "fdatasync"), reason="no fdatasync (macOS, Windows)")
@pytest.mark.parametrize(("code", "raises"), [(5, True), (28, True), (22, False)])
def test_a_data_flush_error_fails_a_strict_save_unless_unsupported(tmp_path, monkeypatch,
                                                                   code, raises):
    import nnx._foundation.atomic as atomic_module

    def failing(fd):
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(atomic_module, "fcntl", None)
    monkeypatch.setattr(os, "fdatasync", failing)
    target = tmp_path / "f.bin"
    if raises:  # EIO, ENOSPC: the save fails and the destination is untouched
        with pytest.raises(OSError) as caught:
            atomic_write(target, lambda f: f.write(b"z"), strict=True)
        assert caught.value.errno == code and not target.exists()
    else:  # EINVAL: a filesystem that cannot flush does not fail the save
        atomic_write(target, lambda f: f.write(b"z"), strict=True)
        assert target.read_bytes() == b"z"
    atomic_write(target, lambda f: f.write(b"w"))  # not strict: tolerated either way
    assert target.read_bytes() == b"w"


def test_sealed_is_the_canonical_form_with_its_digest_encoded_once():
    from nnx._foundation.hashing import canonical_bytes, sealed, sha256_hex

    fields = {"run": "r", "score": 0.25, "format": "x", "generation": 3}
    encoded = canonical_bytes(fields)
    assert sealed(encoded) == canonical_bytes({**fields, "sha256": sha256_hex(encoded)})
    body = {"b": [1, 2], "a": None}
    raw = canonical_bytes(body)
    assert sealed(b'{"body":' + raw + b"}", hashed=raw) == canonical_bytes(
        {"body": body, "sha256": sha256_hex(raw)})
