"""fsync_together (issue 38): several written files and directories flushed at once,
each exactly as fsync_file / fsync_dir flush it, every flush in flight together (so
the caller waits about one), and an error raised only once all have finished."""

from __future__ import annotations

import errno
import threading

import pytest

from nnx._foundation import atomic


def test_every_file_and_directory_is_flushed_once_all_at_once(tmp_path, monkeypatch):
    files = [tmp_path / f"f{i}" for i in range(3)]
    for path in files:
        path.write_bytes(b"x")
    # Each flush waits at the barrier until all four are in flight: one after another,
    # the first would never pass it (the timeout only turns that hang into an error).
    barrier = threading.Barrier(4, timeout=30)
    flushed: list[tuple[str, object]] = []

    def fsync_file(path, *, strict=False):
        barrier.wait()
        flushed.append(("file", path))

    def fsync_dir(path, *, strict=False):
        barrier.wait()
        flushed.append(("dir", path))

    monkeypatch.setattr(atomic, "fsync_file", fsync_file)
    monkeypatch.setattr(atomic, "fsync_dir", fsync_dir)
    atomic.fsync_together(files, [tmp_path])
    assert sorted(flushed, key=str) == sorted(
        [*(("file", path) for path in files), ("dir", tmp_path)], key=str)


def test_a_strict_error_is_raised_after_every_other_flush_finished(tmp_path, monkeypatch):
    done: list[str] = []

    def fsync_file(path, *, strict=False):
        if path.name == "bad":
            raise OSError(errno.EIO, "injected I/O error")
        done.append(path.name)

    monkeypatch.setattr(atomic, "fsync_file", fsync_file)
    with pytest.raises(OSError, match="injected I/O error"):
        atomic.fsync_together([tmp_path / "a", tmp_path / "bad", tmp_path / "c"], strict=True)
    assert sorted(done) == ["a", "c"]


def test_real_files_and_nothing_at_all(tmp_path):
    (tmp_path / "a").write_bytes(b"data")
    atomic.fsync_together([tmp_path / "a"], [tmp_path], strict=True)
    atomic.fsync_together([])
