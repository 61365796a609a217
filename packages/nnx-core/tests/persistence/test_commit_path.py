"""The calls and bytes of an epoch commit (issue 38; docs/durability.md, "Flushes per
commit"): one flush of ``checkpoints/`` per commit, file data flushed with
``fdatasync`` where the system has it, and nothing the commit wrote read back: the
listing summary and the score beside runs/best come from what the commit holds, the
same bytes as read back."""

from __future__ import annotations

import builtins
import collections
import functools
import io
import os
import stat
import threading
from pathlib import Path

import pytest
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

import nnx._engine.epoch_commit as epoch_commit
import nnx._persistence.best_score as best_score
import nnx._persistence.point_flush as point_flush
import nnx._persistence.run_summary as run_summary
from nnx import MonitorSpec, NNCheckpoint, NNEvaluationDataPoint, NNTrainParams
from nnx._foundation.atomic import fsync_dir
from nnx._foundation.hashing import canonical_bytes, sha256_hex
from nnx._persistence.best import SCORE_NAME
from nnx._persistence.known_files import recall, remember
from nnx._persistence.point_flush import one_directory_flush
from nnx.history import HistoryJournal

_DATASYNC = hasattr(os, "fdatasync")


def _fit(root: Path, errors: list[float], **changes):
    """A run whose validation error is scripted per epoch (BEST scores it)."""
    def evaluate(ctx):
        return NNEvaluationDataPoint(error=errors[ctx.epoch_idx], loss=errors[ctx.epoch_idx])

    params = NNTrainParams(n_epochs=len(errors), train_loader=tiny_batches(),
                           val_loader=tiny_batches(1), optim=sgd(), scheduler=None, seed=0,
                           **{k: v for k, v in changes.items() if k != "history"})
    return tiny_model().train(params, eval_step_fn=evaluate, root=root, verbose=False,
                              history=changes.get("history"))


class _Committing:
    """The epoch whose commit is being written in the calling thread (None elsewhere):
    ``EpochCommit.write`` runs on the commit's writer thread (or inline)."""

    def __init__(self) -> None:
        self.by_thread: dict[int, int] = {}

    def __getitem__(self, index: int) -> int | None:
        return self.by_thread.get(threading.get_ident())


def _committing(monkeypatch) -> _Committing:
    epoch = _Committing()
    write = epoch_commit.EpochCommit.write

    def watched(self, staged):
        epoch.by_thread[threading.get_ident()] = staged.epoch
        try:
            return write(self, staged)
        finally:
            del epoch.by_thread[threading.get_ident()]

    monkeypatch.setattr(epoch_commit.EpochCommit, "write", watched)
    return epoch


def _per_commit(monkeypatch, sink: dict[int, collections.Counter]) -> None:
    """Count the flushes (of a file or a directory) and renames of each epoch's commit."""
    epoch = _committing(monkeypatch)
    def counted(name, original):
        def call(*args, **kwargs):
            if epoch[0] is not None:
                what = name
                if name != "replace":
                    what += "-dir" if stat.S_ISDIR(os.fstat(args[0]).st_mode) else "-file"
                sink.setdefault(epoch[0], collections.Counter())[what] += 1
            return original(*args, **kwargs)
        return call

    for name in ("fsync", "fdatasync", "replace"):
        if hasattr(os, name):
            monkeypatch.setattr(os, name, counted(name, getattr(os, name)))


def test_each_commit_flushes_its_checkpoints_directory_once(tmp_path, monkeypatch):
    counts: dict[int, collections.Counter] = {}
    _per_commit(monkeypatch, counts)
    _fit(tmp_path / "runs", [0.5, 0.4])  # epoch 1 improves: BEST again
    data = "fdatasync-file" if _DATASYNC else "fsync-file"
    # Epoch 0: runs/.best-pending (the fit's marker), checkpoints/ once for LAST, FIRST
    # and BEST, the runs root for the hand-over. Files: idps.csv; LAST's sidecar, staged
    # manifest and checkpoint; FIRST's and BEST's staged manifest and checkpoint (their
    # sidecar is LAST's); the score beside runs/best is a verified cache, not flushed.
    assert counts[0] == {"fsync-dir": 3, data: 8, "replace": 17}
    # Epoch 1: checkpoints/ once for LAST and BEST (the run owns runs/best already).
    assert counts[1] == {"fsync-dir": 1, data: 6, "replace": 12}


@pytest.mark.skipif(not _DATASYNC, reason="no fdatasync on this system (macOS, Windows)")
def test_file_data_is_flushed_with_fdatasync_and_directories_with_fsync(tmp_path,
                                                                        monkeypatch):
    counts: dict[int, collections.Counter] = {}
    _per_commit(monkeypatch, counts)
    _fit(tmp_path / "runs", [0.5])
    assert counts[0]["fsync-file"] == 0 and counts[0]["fdatasync-dir"] == 0
    assert counts[0]["fdatasync-file"] > 0 and counts[0]["fsync-dir"] > 0


def _reads(monkeypatch, sink: list[tuple[int, str]]) -> None:
    """Record the manifests, summaries and YAML files each commit opens for reading."""
    epoch = _committing(monkeypatch)
    def opened(file, mode="r", *args, **kwargs):
        name = os.path.basename(os.fspath(file)) if not isinstance(file, int) else ""
        if (epoch[0] is not None and "r" in mode and "+" not in mode
                and name.endswith((".manifest.json", "summary.json", ".yaml"))):
            sink.append((epoch[0], name))
        return original(file, mode, *args, **kwargs)

    original = io.open
    monkeypatch.setattr(io, "open", opened)  # pathlib's read_bytes / read_text
    monkeypatch.setattr(builtins, "open", opened)


def test_a_commit_reads_back_no_manifest_summary_or_run_file(tmp_path, monkeypatch):
    read: list[tuple[int, str]] = []
    _reads(monkeypatch, read)
    _fit(tmp_path / "runs", [0.5, 0.4, 0.3])
    # The first commit looks for an earlier summary and checks run.yaml and metadata.yaml;
    # later commits read nothing back: not LAST's or BEST's manifest (for the next
    # generation, the score beside runs/best, the summary), not the previous summary,
    # not the run's YAML files again.
    assert read and [epoch for epoch, _ in read] == [0] * len(read)
    assert {name for _, name in read} <= {"summary.json", "run.yaml", "metadata.yaml"}


def _old_way(run_dir: Path, previous: bytes | None, write) -> bytes:
    """The summary as reading back what the commit wrote gives it: the manifests, the
    previous summary and the YAML files from disk (nothing this process remembers)."""
    path = run_dir / "summary.json"
    new = path.read_bytes() if path.exists() else None
    if previous is None:
        path.unlink(missing_ok=True)
    else:
        path.write_bytes(previous)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_summary, "recall", lambda _path: None)
        write()
    old = path.read_bytes() if path.exists() else None
    if new is not None:
        path.write_bytes(new)
    return old


@pytest.mark.parametrize("case", ["best", "named-monitor", "named-monitor-no-best",
                                  "journal"])
def test_the_summary_from_memory_is_the_summary_read_back(tmp_path, monkeypatch, case):
    compared: list[int] = []
    real = run_summary.write_summary

    def both(run_dir, **kwargs):
        path = run_dir / "summary.json"
        previous = path.read_bytes() if path.exists() else None
        real(run_dir, **kwargs)
        new = path.read_bytes()
        assert new == _old_way(run_dir, previous, functools.partial(real, run_dir, **kwargs))
        # The one-pass encoding is the canonical form of {"body": ..., "sha256": ...}.
        body = run_summary.read_summary_body(run_dir)
        assert new == canonical_bytes({"body": body,
                                       "sha256": sha256_hex(canonical_bytes(body))})
        compared.append(kwargs["epoch"])

    monkeypatch.setattr("nnx._persistence.summary_writer.write_summary", both)
    errors = [0.5, 0.4, 0.45, 0.3]
    changes: dict = {}
    if case.startswith("named-monitor"):
        changes["monitor"] = MonitorSpec(metric="error", split="val")
        if case.endswith("no-best"):
            errors = [float("nan")] * 3  # never a finite value: no BEST at all
    if case == "journal":
        changes["history"] = HistoryJournal(retention=4, chunk_size=2)
    run = _fit(tmp_path / "runs", errors, **changes)
    assert compared[:len(errors)] == list(range(len(errors)))
    has_best = (run.checkpoints_dir / "best.pt").exists()
    assert has_best == (case != "named-monitor-no-best")


def test_the_score_beside_runs_best_is_the_one_read_back(tmp_path, monkeypatch):
    records: list[bytes] = []
    real = best_score.write_score

    def both(root, run_id, score):
        real(root, run_id, score)
        new = (root / SCORE_NAME).read_bytes()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(best_score, "recall", lambda _path: None)
            real(root, run_id, score)
        assert (root / SCORE_NAME).read_bytes() == new
        fields = {k: v for k, v in best_score.load_json(root / SCORE_NAME).items()
                  if k != "sha256"}
        assert new == canonical_bytes({**fields, "sha256": sha256_hex(
            canonical_bytes(fields))}) + b"\n"
        records.append(new)

    monkeypatch.setattr("nnx._persistence.best.write_score", both)
    _fit(tmp_path / "runs", [0.5, 0.4, 0.3])
    assert len(records) == 3  # the hand-over, then the owner's own improvements


def _save(directory: Path, tag: str, epoch: int) -> None:
    checkpoint = NNCheckpoint(tag=tag, epoch=epoch, run_id="r", state_dict={}, model={},
                              train={})
    checkpoint.save(directory / f"{tag}.pt", training_state={"epoch": epoch})


def _dir_flushes(monkeypatch, log: list[str]) -> None:
    def flush(path, **kwargs):
        log.append(f"flush {Path(path).name}")
        return fsync_dir(path, **kwargs)

    monkeypatch.setattr(point_flush, "fsync_dir", flush)


def test_points_of_one_block_share_one_flush_and_clean_up_after_it(tmp_path, monkeypatch):
    log: list[str] = []
    _dir_flushes(monkeypatch, log)
    _save(tmp_path, "last", 0)
    assert log == ["flush " + tmp_path.name]  # outside a block: at once
    log.clear()
    with one_directory_flush():
        _save(tmp_path, "last", 1)
        _save(tmp_path, "best", 1)
        assert log == []
        # The previous generation stays until the flush makes the new manifest last.
        assert (tmp_path / "last.pt.opt.1.pt").exists()
    assert log == ["flush " + tmp_path.name]
    assert not (tmp_path / "last.pt.opt.1.pt").exists()
    assert (tmp_path / "last.pt.opt.2.pt").exists()


def test_a_block_that_fails_still_flushes_what_it_published(tmp_path, monkeypatch):
    log: list[str] = []
    _dir_flushes(monkeypatch, log)
    _save(tmp_path, "last", 0)
    log.clear()
    with pytest.raises(RuntimeError, match="after LAST"), one_directory_flush():
        _save(tmp_path, "last", 1)
        raise RuntimeError("after LAST")
    assert log == ["flush " + tmp_path.name]
    assert sorted(p.name for p in tmp_path.glob("last.pt.opt.*.pt")) == ["last.pt.opt.2.pt"]


def test_the_hand_over_waits_for_the_flush_of_the_best_it_names(tmp_path, monkeypatch):
    log: list[str] = []
    _dir_flushes(monkeypatch, log)
    replace = os.replace

    def renamed(src, dst, *args, **kwargs):
        if Path(dst).name == "best":
            log.append("runs/best moves")
        return replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", renamed)
    _fit(tmp_path / "runs", [0.5])
    assert log.index("flush checkpoints") < log.index("runs/best moves")


def test_what_a_process_wrote_is_recalled_only_while_the_file_is_the_same(tmp_path):
    path = tmp_path / "f.json"
    path.write_bytes(b"{}")
    remember(path, "known")
    assert recall(path) == "known"
    replacement = tmp_path / "g.json"
    replacement.write_bytes(b"{}")  # same size, another file renamed over it
    os.replace(replacement, path)
    assert recall(path) is None
    remember(path, "again")
    path.unlink()
    assert recall(path) is None
