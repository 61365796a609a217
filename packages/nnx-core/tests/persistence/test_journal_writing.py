"""Writing the history journal (spec §4.5): its configuration, the bounded window, bytes
growing linearly, mid-epoch chunks invisible until the commit, torn appends, rollback."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest
from _support.history_journal import (
    INF,
    NAN,
    commit_all,
    epoch_of,
    epochs,
    record,
    run_dir,
    selection,
    states,
)

from nnx._foundation.records import NNEvaluationDataPoint
from nnx.history import (
    HistoryJournal,
    JournalWriter,
    epoch_summary,
    iter_history,
    read_epochs,
    read_manifest,
    read_tail,
)


# -- configuration -----------------------------------------------------------------------
def test_journal_config_validates_and_resolves_chunk() -> None:
    assert HistoryJournal(retention=1000).chunk == 250
    assert HistoryJournal(retention=10).chunk == 10
    assert HistoryJournal(retention=10, chunk_size=4).chunk == 4
    for bad in (0, -1, 2.0, True, "5"):
        with pytest.raises(ValueError, match=r"HistoryJournal\.retention"):
            HistoryJournal(retention=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"HistoryJournal\.chunk_size must be .*<= retention"):
        HistoryJournal(retention=4, chunk_size=5)
    with pytest.raises(ValueError, match=r"HistoryJournal\.chunk_size"):
        HistoryJournal(retention=4, chunk_size=0)
    spec = HistoryJournal(retention=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.retention = 4  # type: ignore[misc]
    assert spec == HistoryJournal(retention=3) and hash(spec) == hash(HistoryJournal(3))


# -- writing and reading back --------------------------------------------------------
def test_window_is_bounded_and_iter_history_returns_exactly_the_committed_records(
        tmp_path: Path) -> None:
    path = run_dir(tmp_path)
    writer = JournalWriter(path, HistoryJournal(retention=5, chunk_size=2))
    records = epochs(0, 4, 7)
    records[3] = dataclasses.replace(records[3], train_edp=NNEvaluationDataPoint(
        loss=NAN, error=INF, metrics={"nll": NAN}, extra={"gap": -INF}))
    records[9] = dataclasses.replace(records[9], lr=NAN, selection=selection(NAN))
    commit_all(writer, records)

    assert len(writer.window) == 5 and states(writer.window) == states(records[-5:])
    got = list(iter_history(path))
    assert states(got) == states(records)
    assert math.isnan(got[3].train_edp.loss) and got[3].train_edp.error == INF  # type: ignore[union-attr]
    assert got[3].train_edp.extra["gap"] == -INF  # type: ignore[union-attr]
    assert math.isnan(got[9].lr) and math.isnan(got[9].selection["value"])  # type: ignore[arg-type,index]
    hdir = path / "history"
    assert b"NaN" in (hdir / "chunk-00000001.jsonl").read_bytes()
    # every epoch ends its own chunk: 7 records in chunks of 2 -> 4 chunks per epoch
    chunks = sorted(hdir.glob("chunk-*.jsonl"))
    assert len(chunks) == 16 and chunks[-1].name == "chunk-00000015.jsonl"
    index = [json.loads(line) for line in (hdir / "index.jsonl").read_text().splitlines()]
    assert [e["records"] for e in index[:4]] == [2, 2, 2, 1]
    assert [(e["first_epoch"], e["last_epoch"]) for e in index[4:8]] == [(1, 1)] * 4
    assert all(index[i + 1]["prev"] != index[i]["prev"] for i in range(15))
    rows = read_epochs(path)
    assert [(r["epoch"], r["records"]) for r in rows] == [(e, 7) for e in range(4)]
    assert rows[-1]["summary"] == records[-1].state()
    manifest = read_manifest(path)
    assert manifest is not None and (manifest.chunks, manifest.records, manifest.epochs,
                                     manifest.last_epoch) == (16, 28, 4, 3)
    assert states(read_tail(path, 5, None)) == states(records[-5:])
    assert states(read_tail(path, 100, None)) == states(records)
    # a new writer over the same journal continues it, window reloaded from disk
    again = JournalWriter(path, HistoryJournal(retention=3, chunk_size=2))
    assert states(again.window) == states(records[-3:]) and again.committed_epoch == 3
    commit_all(again, epoch_of(4, 3, 28))
    assert [r.iter_idx for r in iter_history(path)] == list(range(31))


def test_bytes_written_grow_linearly(tmp_path: Path) -> None:
    path = run_dir(tmp_path)
    writer = JournalWriter(path, HistoryJournal(retention=8))  # one chunk per epoch
    hdir = path / "history"
    appended, written, manifest_sizes = [], [], []
    before_files = before_written = 0
    for e in range(10, 20):  # fixed-width epochs and iter_idx: every epoch is the same size
        commit_all(writer, [record(e, 1000 + 8 * (e - 10) + b, b, loss=0.5) for b in range(8)])
        files = sum(p.stat().st_size for p in hdir.iterdir() if p.name != "journal.json")
        appended.append(files - before_files)
        written.append(writer.bytes_written - before_written)
        manifest_sizes.append((hdir / "journal.json").stat().st_size)
        before_files, before_written = files, writer.bytes_written
    assert len(set(appended)) == 1, appended  # chunks + index + epochs: constant per epoch
    # the manifest is replaced, not appended: only its counts widen (by a digit now and then)
    assert max(manifest_sizes) - min(manifest_sizes) <= 6 and max(manifest_sizes) < 300
    assert [w - m for w, m in zip(written, manifest_sizes, strict=True)] == appended
    assert len(writer.window) == 8
    print(f"\nbytes per epoch (8 records): appended {appended[0]}, written {written}, "
          f"manifest {manifest_sizes[-1]}")


def test_mid_epoch_chunks_are_invisible_until_the_commit(tmp_path: Path) -> None:
    path = run_dir(tmp_path)
    writer = JournalWriter(path, HistoryJournal(retention=4, chunk_size=2))
    commit_all(writer, epoch_of(0, 2, 0))
    for r in epoch_of(1, 5, 2):
        writer.append(r)
    assert len(list((path / "history").glob("chunk-*.jsonl"))) == 3  # 1 committed + 2 mid-epoch
    assert [r.epoch for r in iter_history(path)] == [0, 0]
    final = record(1, 6, 4, last=True, loss=9.0)
    writer.replace_last(final)
    assert writer.window[-1] is final and writer.pending == 5
    with pytest.raises(ValueError, match="iter_idx"):
        writer.replace_last(record(1, 5, 3))
    with pytest.raises(ValueError, match="commit_epoch"):
        writer.append(record(2, 7, 0))
    writer.commit_epoch(1, epoch_summary(final))
    got = list(iter_history(path))
    assert len(got) == 7 and got[-1].train_edp.loss == 9.0  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="already committed"):
        writer.append(record(1, 8, 0))
    with pytest.raises(ValueError, match="already committed"):
        writer.commit_epoch(1, {})
    with pytest.raises(TypeError):
        writer.append("not a record")  # type: ignore[arg-type]


def test_torn_append_after_publish_is_invisible_and_repaired(tmp_path: Path) -> None:
    path = run_dir(tmp_path)
    writer = JournalWriter(path, HistoryJournal(retention=6, chunk_size=3))
    first = epochs(0, 2, 3)
    commit_all(writer, first)
    hdir = path / "history"
    with open(hdir / "index.jsonl", "ab") as f:
        f.write(b'{"seq":2,"chunk":"chunk-000')  # a crash mid-append
    with open(hdir / "epochs.jsonl", "ab") as f:
        f.write(b'{"epoch":2,"rec')
    (hdir / "chunk-00000002.jsonl").write_bytes(b'{"epoch":2,"iter')
    assert states(iter_history(path)) == states(first)
    assert [r["epoch"] for r in read_epochs(path)] == [0, 1]
    # a fresh writer (the restarted process) commits over the torn tail
    writer = JournalWriter(path, HistoryJournal(retention=6, chunk_size=3))
    second = epoch_of(2, 3, 6)
    commit_all(writer, second)
    assert states(iter_history(path)) == states(first + second)
    assert [r["epoch"] for r in read_epochs(path)] == [0, 1, 2]
    assert (hdir / "index.jsonl").read_bytes().count(b"\n") == 3
    assert b"rec\n" not in (hdir / "epochs.jsonl").read_bytes()


def test_rollback_republishes_the_previous_manifest(tmp_path: Path) -> None:
    path = run_dir(tmp_path)
    writer = JournalWriter(path, HistoryJournal(retention=4, chunk_size=2))
    e0, e1 = epoch_of(0, 3, 0), epoch_of(1, 3, 3)
    commit_all(writer, e0)
    after_e0 = (path / "history" / "journal.json").read_bytes()
    commit_all(writer, e1)
    assert writer.committed_epoch == 1
    writer.rollback()  # LAST of epoch 1 failed
    assert (path / "history" / "journal.json").read_bytes() == after_e0
    assert states(iter_history(path)) == states(e0)
    assert states(writer.window) == states(e0) and writer.committed_epoch == 0
    assert [r["epoch"] for r in read_epochs(path)] == [0]
    writer.rollback()  # nothing more to undo: the committed epoch 0 stays
    assert (path / "history" / "journal.json").read_bytes() == after_e0
    retry = epoch_of(1, 2, 3, loss=0.75)
    commit_all(writer, retry)
    assert states(iter_history(path)) == states(e0 + retry)
    # a commit that fails before writing publishes nothing; rollback keeps epoch 1
    writer.append(record(2, 5, 0))
    with pytest.raises(ValueError, match="not JSON"):
        writer.commit_epoch(2, {"bad": object()})
    writer.rollback()
    assert states(iter_history(path)) == states(e0 + retry)
    assert states(writer.window) == states((e0 + retry)[-4:])
    # a partial epoch is discarded, the window reloaded
    for r in epoch_of(2, 3, 5):
        writer.append(r)
    writer.discard_epoch()
    assert states(writer.window) == states((e0 + retry)[-4:]) and writer.pending == 0
    commit_all(writer, epoch_of(2, 1, 5))
    assert [r.epoch for r in iter_history(path)] == [0, 0, 0, 1, 1, 2]
