"""The epoch commit written by a background writer (issue 38; docs/durability.md, "The
durability window").

The background commit writes what the synchronous one writes, byte for byte where
the bytes are the run's (history, weights, training state, positions) and under the
same run id; callbacks, BEST, early stopping and the plateau schedule see exactly
the same epochs; at most one commit is in flight and the next is staged only after
it is durable; ``train()`` returns once the last one is durable; a writer's error is
raised in the training thread (the same exception) no later than the next epoch's
commit, with the history cut back to the last durable epoch, and the run resumes from
there bit for bit; a Ctrl-C leaves the commit in flight durable.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

import nnx._engine.epoch_commit as epoch_commit
import nnx._persistence.resume_point as resume_point
from nnx import (
    Callback,
    EarlyStopping,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNSchedulerParams,
    NNTrainParams,
)
from nnx._engine.commit_stage import staged_copy
from nnx._engine.commit_writer import CommitWriter
from nnx._persistence.point_manifest import read_point
from nnx.history import HistoryJournal

LOSSES = [0.9, 0.7, 0.72, 0.71, 0.74, 0.6]  # improves on 0 and 1, then plateaus


def _scripted(ctx: Any) -> NNEvaluationDataPoint:
    return NNEvaluationDataPoint(loss=LOSSES[ctx.epoch_idx])


def _params(n_epochs: int = 4, **changes: Any) -> NNTrainParams:
    return NNTrainParams(
        n_epochs=n_epochs, train_loader=tiny_batches(3), val_loader=tiny_batches(1, seed=1),
        optim=sgd(0.05), seed=0,
        scheduler=NNSchedulerParams.builder().reduce_on_plateau(
            factor=0.5, patience=0, threshold=1e-3).build(), **changes)


class Seen(Callback):
    """What the callbacks see: each epoch's record, LR, stop flag, and the end."""

    def __init__(self) -> None:
        self.epochs: list[tuple[Any, ...]] = []
        self.begun: list[int] = []
        self.end_epochs: list[int] = []
        self.error: BaseException | None = None

    def on_epoch_begin(self, ctx: Any) -> None:
        self.begun.append(ctx.epoch)

    def on_epoch_end(self, ctx: Any) -> None:
        self.epochs.append((ctx.epoch, ctx.idp.lr, ctx.idp.val_edp.loss, ctx.should_stop,
                            ctx.idp.iter_idx))

    def on_train_end(self, ctx: Any) -> None:
        self.end_epochs = sorted({r.epoch for r in ctx.idps})
        self.error = ctx.error


def _train(root: Path, *, commit: bool, callbacks: tuple[Any, ...] = (), journal: bool = False,
           **changes: Any) -> Any:
    return tiny_model().train(_params(**changes) if "async_commit" in changes else
                              _params(async_commit=commit, **changes),
                              eval_step_fn=_scripted, callbacks=list(callbacks), root=root,
                              verbose=False,
                              history=HistoryJournal(retention=4, chunk_size=2) if journal
                              else None)


def _point_state(run_dir: Path, tag: str) -> tuple[Any, ...]:
    checkpoint, state = NNCheckpoint.load_with_training_state(
        run_dir.name, tag, root=run_dir.parent)
    point = read_point(run_dir / "checkpoints" / f"{tag}.pt")
    assert point is not None and state is not None
    state = {k: v for k, v in state.items() if k != "checkpoint_id"}  # unique per write
    return checkpoint.epoch, dict(checkpoint.state_dict), state, point.position


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            _equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_equal, a, b))
    return bool(a == b)


# -- the same run, either way ---------------------------------------------------------------
@pytest.mark.parametrize("journal", [False, True], ids=["csv", "journal"])
def test_the_background_commit_writes_what_the_synchronous_one_writes(tmp_path, journal):
    seen = {commit: Seen() for commit in (True, False)}
    stops = {commit: EarlyStopping(patience=2) for commit in (True, False)}
    runs = {commit: _train(tmp_path / str(commit), commit=commit, journal=journal,
                           n_epochs=6, callbacks=(stops[commit], seen[commit]))
            for commit in (True, False)}
    assert runs[True].id == runs[False].id  # async_commit is runtime-only
    # Callbacks, the plateau schedule's LR and early stopping saw the same epochs.
    assert seen[True].epochs == seen[False].epochs
    assert seen[True].epochs[-1][0] == 3 and seen[True].epochs[-1][3]  # stopped at epoch 3
    assert len({lr for _, lr, *_ in seen[True].epochs}) > 1  # the plateau schedule acted
    assert seen[True].end_epochs == seen[False].end_epochs  # the window, under a journal
    assert seen[True].end_epochs == ([2, 3] if journal else [0, 1, 2, 3])
    dirs = {commit: tmp_path / str(commit) / runs[commit].id for commit in (True, False)}
    for tag in ("last", "best", "first"):
        assert _equal(_point_state(dirs[True], tag), _point_state(dirs[False], tag)), tag
    assert NNCheckpoint.load(runs[True].id, "best", root=tmp_path / "True").epoch == 1
    history = "history/epochs.jsonl" if journal else "idps.csv"
    assert (dirs[True] / history).read_bytes() == (dirs[False] / history).read_bytes()
    assert [r.state() for r in runs[True].idps] == [r.state() for r in runs[False].idps]


def test_async_commit_is_a_checked_runtime_option():
    plan = _params()
    assert plan.async_commit is True
    assert "async_commit" not in plan.state()
    assert replace(plan, async_commit=False).state() == plan.state()
    with pytest.raises(ValueError, match="async_commit must be a bool"):
        NNTrainParams(n_epochs=1, train_loader=tiny_batches(), async_commit="no")


# -- one commit in flight ----------------------------------------------------------------------
def test_one_commit_is_in_flight_and_the_next_is_staged_after_it_is_durable(tmp_path,
                                                                           monkeypatch):
    events: list[tuple[str, int, str]] = []
    stage, write = epoch_commit.EpochCommit.stage, epoch_commit.EpochCommit.write

    def staged(self: Any, epoch: int, *args: Any, **kwargs: Any) -> Any:
        events.append(("stage", epoch, threading.current_thread().name))
        return stage(self, epoch, *args, **kwargs)

    def written(self: Any, commit: Any) -> None:
        events.append(("write", commit.epoch, threading.current_thread().name))
        time.sleep(0.05)  # the next epoch trains meanwhile
        write(self, commit)
        events.append(("durable", commit.epoch, threading.current_thread().name))

    monkeypatch.setattr(epoch_commit.EpochCommit, "stage", staged)
    monkeypatch.setattr(epoch_commit.EpochCommit, "write", written)
    run = _train(tmp_path, commit=True)
    order = [(kind, epoch) for kind, epoch, _ in events]
    for epoch in range(1, 4):  # epoch e is staged only once epoch e-1 is durable
        assert order.index(("durable", epoch - 1)) < order.index(("stage", epoch))
    assert {thread for kind, _, thread in events if kind == "stage"} == {"MainThread"}
    assert {thread for kind, _, thread in events if kind != "stage"} == {"nnx-commit"}
    # train() returned after the last commit was durable.
    assert order[-1] == ("durable", 3)
    last = read_point(run.checkpoints_dir / "last.pt")
    assert last is not None and last.position["completed_epoch"] == 3


def test_the_staged_copy_is_not_changed_by_the_training_that_follows():
    weight = torch.nn.Linear(3, 3).weight.detach()
    live = {"a": weight, "tied": weight, "state": {"step": torch.tensor(1.0), "n": [1, 2]}}
    copy = staged_copy(live)
    assert _equal(copy, live)
    assert copy["a"].untyped_storage().data_ptr() == copy["tied"].untyped_storage().data_ptr()
    weight.add_(1.0)
    live["state"]["step"] += 1
    live["state"]["n"].append(3)
    assert not torch.equal(copy["a"], weight) and copy["state"]["step"].item() == 1.0
    assert copy["state"]["n"] == [1, 2]


# -- a writer's error ---------------------------------------------------------------------------
def _failing_write(monkeypatch: Any, name: str, at: int, code: int) -> list[str]:
    """``name`` cannot be written the ``at``-th time (1-based): an OSError ``code``."""
    original, seen, failed = resume_point.atomic_write_bytes, [], []

    def write(path: Any, data: bytes, **kwargs: Any) -> Any:
        if Path(path).name == name:
            seen.append(threading.current_thread().name)
            if len(seen) == at:
                failed.append(seen[-1])
                raise OSError(code, os.strerror(code), os.fspath(path))
        return original(path, data, **kwargs)

    monkeypatch.setattr(resume_point, "atomic_write_bytes", write)
    return failed


def test_an_io_error_in_the_writer_surfaces_and_the_run_resumes_from_the_last_durable_point(
        tmp_path, monkeypatch):
    failed = _failing_write(monkeypatch, "last.pt", 2, errno.EIO)  # epoch 1's LAST
    seen = Seen()
    with pytest.raises(OSError) as raised:
        _train(tmp_path / "cut", commit=True, callbacks=(seen,))
    monkeypatch.undo()
    assert raised.value.errno == errno.EIO and failed == ["nnx-commit"]
    assert seen.error is raised.value  # on_train_end was told why
    assert 3 not in seen.begun  # raised at epoch 2's boundary or commit, never later
    assert seen.end_epochs == [0]  # the history in memory: the durable epochs only
    run_id = next(p.name for p in (tmp_path / "cut").iterdir() if len(p.name) == 32)
    cut = tmp_path / "cut" / run_id
    assert NNCheckpoint.load(run_id, "last", root=tmp_path / "cut").epoch == 0
    rows = (cut / "idps.csv").read_text().splitlines()[1:]
    assert len(rows) == 3  # epoch 0's three records: epoch 1's were rolled back
    # The run resumes from LAST (epoch 0) and ends where an uninterrupted run ends.
    resumed = tiny_model().train(
        _params(resume_from_run_id=run_id, resume_mode="stateful", resume_epochs="planned"),
        eval_step_fn=_scripted, root=tmp_path / "cut", verbose=False)
    straight = _train(tmp_path / "straight", commit=True)
    assert _equal(dict(NNCheckpoint.load(resumed.id, "last", root=tmp_path / "cut").state_dict),
                  dict(NNCheckpoint.load(straight.id, "last",
                                         root=tmp_path / "straight").state_dict))


def test_a_full_disk_after_last_keeps_that_epoch(tmp_path, monkeypatch):
    failed = _failing_write(monkeypatch, "best.pt", 2, errno.ENOSPC)  # epoch 1's BEST
    seen = Seen()
    with pytest.raises(OSError) as raised:
        _train(tmp_path, commit=True, callbacks=(seen,))
    assert raised.value.errno == errno.ENOSPC and failed == ["nnx-commit"]
    assert seen.end_epochs == [0, 1]  # LAST of epoch 1 committed: it stays
    run_id = next(p.name for p in tmp_path.iterdir() if len(p.name) == 32)
    assert NNCheckpoint.load(run_id, "last", root=tmp_path).epoch == 1


def test_a_ctrl_c_leaves_the_commit_in_flight_durable(tmp_path, monkeypatch):
    write = epoch_commit.EpochCommit.write

    def slow(self: Any, commit: Any) -> None:
        time.sleep(0.1)  # still writing when the interrupt comes
        write(self, commit)

    class Interrupt(Callback):
        def on_epoch_begin(self, ctx: Any) -> None:
            if ctx.epoch == 2:
                raise KeyboardInterrupt

    monkeypatch.setattr(epoch_commit.EpochCommit, "write", slow)
    with pytest.raises(KeyboardInterrupt):
        _train(tmp_path, commit=True, callbacks=(Interrupt(),))
    run_id = next(p.name for p in tmp_path.iterdir() if len(p.name) == 32)
    assert NNCheckpoint.load(run_id, "last", root=tmp_path).epoch == 1


# -- the writer -----------------------------------------------------------------------------------
def test_the_writer_raises_the_jobs_own_error_once_and_runs_inline_when_not_background():
    error = OSError(errno.EIO, "injected")

    def fail() -> None:
        raise error

    writer = CommitWriter(background=True)
    writer.submit(fail)
    with pytest.raises(OSError) as raised:
        writer.wait()
    assert raised.value is error
    writer.wait()  # raised once
    ran: list[str] = []
    inline = CommitWriter(background=False)
    inline.submit(lambda: ran.append(threading.current_thread().name))
    assert ran == ["MainThread"] and not inline.in_flight
    with pytest.raises(OSError) as raised:
        inline.submit(fail)
    assert raised.value is error


def test_a_full_history_callback_reads_every_committed_epoch_of_a_journal(tmp_path,
                                                                        monkeypatch):
    write = epoch_commit.EpochCommit.write

    def slow(self: Any, commit: Any) -> None:
        time.sleep(0.1)  # still writing when the next epoch ends
        write(self, commit)

    class Full(Callback):
        history_access = "full"

        def __init__(self) -> None:
            self.epochs: list[list[int]] = []

        def on_epoch_end(self, ctx: Any) -> None:
            self.epochs.append(sorted({r.epoch for r in ctx.idps}))

    monkeypatch.setattr(epoch_commit.EpochCommit, "write", slow)
    full = Full()
    _train(tmp_path, commit=True, journal=True, callbacks=(full,))
    # The loop waits for the commit in flight before a full-history callback reads the
    # journal back: each epoch sees every earlier one (a window of 4 records would not).
    assert full.epochs == [[0], [0, 1], [0, 1, 2], [0, 1, 2, 3]]
