"""The history journal (§4.5): writer, window, readers, lineage, export and migration."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest
import torch
import yaml

from nnx._foundation.records import MonitorRecord, NNEvaluationDataPoint, NNIterationDataPoint
from nnx._persistence.history_csv import read_idps_csv, render_idps_csv
from nnx.history import (
    HistoryCorruptionError,
    HistoryJournal,
    HistoryWindow,
    JournalWriter,
    check_history,
    epoch_summary,
    export_history_csv,
    iter_history,
    migrate_history,
    read_epochs,
    read_manifest,
    read_tail,
)

NAN, INF = float("nan"), float("inf")


# -- helpers ---------------------------------------------------------------------------
def record(epoch: int, iter_idx: int, batch_idx: int, *, last: bool = False,
           loss: float | None = None) -> NNIterationDataPoint:
    value = 0.25 + iter_idx / 1024 if loss is None else loss
    train = NNEvaluationDataPoint(loss=value, error=0.125, metrics={"nll": value / 2})
    val = NNEvaluationDataPoint(loss=value * 2, error=0.5, accuracy=0.5) if last else None
    return NNIterationDataPoint(epoch=epoch, iter_idx=iter_idx, batch_idx=batch_idx,
                                train_edp=train, val_edp=val, lr=0.01,
                                update_count=iter_idx + 1,
                                selection=selection(value / 2) if last else None)


def selection(value: float) -> MonitorRecord:
    """The epoch's monitor decision, as the loop records it on the epoch's last record."""
    return MonitorRecord(metric="nll", split="val", direction="min", min_delta=0.0,
                         value=value, status="ok" if math.isfinite(value) else "nonfinite",
                         improved=math.isfinite(value))


def epoch_of(epoch: int, n: int, start: int, **kw: float) -> list[NNIterationDataPoint]:
    return [record(epoch, start + b, b, last=b == n - 1, **kw) for b in range(n)]


def epochs(first: int, count: int, per_epoch: int, start: int = 0
           ) -> list[NNIterationDataPoint]:
    out: list[NNIterationDataPoint] = []
    for e in range(first, first + count):
        out += epoch_of(e, per_epoch, start + len(out))
    return out


def commit_all(writer: JournalWriter, records: Iterable[NNIterationDataPoint]) -> None:
    by_epoch: dict[int, list[NNIterationDataPoint]] = {}
    for r in records:
        by_epoch.setdefault(r.epoch, []).append(r)
    for epoch, rs in by_epoch.items():
        for r in rs:
            writer.append(r)
        writer.commit_epoch(epoch, epoch_summary(rs[-1]))


def states(records: Iterable[NNIterationDataPoint]) -> list[str]:
    """NaN-aware comparison keys (json writes NaN as the same token on both sides)."""
    return [json.dumps(r.state(), sort_keys=True, allow_nan=True) for r in records]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {str(p.relative_to(directory)): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file()}


def run_dir(tmp_path: Path, name: str = "r0") -> Path:
    path = tmp_path / "runs" / name
    path.mkdir(parents=True)
    (path / "run.yaml").write_text(yaml.safe_dump({"train": {}}), encoding="utf-8")
    return path


def write_last(path: Path, epoch: int) -> None:
    (path / "checkpoints").mkdir(exist_ok=True)
    torch.save({"epoch": epoch}, path / "checkpoints" / "last.pt")


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


def _flip_chunk(hdir: Path) -> None:
    data = bytearray((hdir / "chunk-00000001.jsonl").read_bytes())
    data[10] ^= 0x01
    (hdir / "chunk-00000001.jsonl").write_bytes(bytes(data))


def _delete_chunk(hdir: Path) -> None:
    (hdir / "chunk-00000001.jsonl").unlink()


def _edit_index(hdir: Path) -> None:
    lines = (hdir / "index.jsonl").read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"records":2', b'"records":3')
    (hdir / "index.jsonl").write_bytes(b"".join(lines))


def _edit_last_index_line(hdir: Path) -> None:
    lines = (hdir / "index.jsonl").read_bytes().splitlines(keepends=True)
    entry = json.loads(lines[-1])
    entry["last_iter"] = 99
    lines[-1] = json.dumps(entry, separators=(",", ":")).encode() + b"\n"
    (hdir / "index.jsonl").write_bytes(b"".join(lines))


def _garble_manifest(hdir: Path) -> None:
    (hdir / "journal.json").write_text('{"format": "nnx.history/1", "chunks": -1}')


@pytest.mark.parametrize("damage", [_flip_chunk, _delete_chunk, _edit_index,
                                    _edit_last_index_line, _garble_manifest])
def test_corruption_raises_and_modifies_nothing(tmp_path: Path, damage: object) -> None:
    path = run_dir(tmp_path)
    commit_all(JournalWriter(path, HistoryJournal(retention=4, chunk_size=2)),
               epochs(0, 2, 4))
    hdir = path / "history"
    damage(hdir)  # type: ignore[operator]
    before = snapshot(path)
    with pytest.raises(HistoryCorruptionError) as info:
        list(iter_history(path))
    assert isinstance(info.value, ValueError)
    with pytest.raises(HistoryCorruptionError):
        export_history_csv(path, tmp_path / "out.csv")
    if damage in (_edit_index, _edit_last_index_line, _garble_manifest):
        with pytest.raises(HistoryCorruptionError, match=r"index\.jsonl|journal\.json"):
            check_history(path)
    else:  # the manifest and index are intact; only reading the chunk finds the damage
        assert check_history(path) == read_manifest(path)
    with pytest.raises(HistoryCorruptionError):  # its window reaches back to the damage
        JournalWriter(path, HistoryJournal(retention=8, chunk_size=2))
    assert snapshot(path) == before and not (tmp_path / "out.csv").exists()


def test_read_tail_reads_only_the_chunks_holding_the_tail(tmp_path: Path) -> None:
    path = run_dir(tmp_path)
    records = epochs(0, 3, 4)
    commit_all(JournalWriter(path, HistoryJournal(retention=4, chunk_size=2)), records)
    (path / "history" / "chunk-00000000.jsonl").unlink()
    assert states(read_tail(path, 3, None)) == states(records[-3:])
    assert states(read_tail(path, 6, 1)) == states(records[2:8])
    with pytest.raises(HistoryCorruptionError, match="missing"):
        list(iter_history(path))
    with pytest.raises(HistoryCorruptionError):
        read_tail(path, 12, None)
    assert read_tail(run_dir(tmp_path, "empty"), 5, None) == []


def test_last_epoch_filters_records_past_last(tmp_path: Path) -> None:
    path = run_dir(tmp_path)
    records = epochs(0, 4, 2)
    commit_all(JournalWriter(path, HistoryJournal(retention=3, chunk_size=2)), records)
    assert [r.epoch for r in iter_history(path, last_epoch=1)] == [0, 0, 1, 1]
    assert [r["epoch"] for r in read_epochs(path, last_epoch=2)] == [0, 1, 2]
    assert [r.iter_idx for r in read_tail(path, 3, 1)] == [1, 2, 3]
    write_last(path, 2)  # the published epoch 3 never got its LAST: readers hide it
    assert [r.epoch for r in iter_history("r0", root=tmp_path / "runs")] == [0, 0, 1, 1, 2, 2]
    out = export_history_csv("r0", tmp_path / "x.csv", root=tmp_path / "runs")
    assert out.read_text() == render_idps_csv(records[:6])
    (path / "checkpoints" / "last.pt").write_bytes(b"")
    with pytest.raises(ValueError, match="LAST"):
        iter_history(path)
    with pytest.raises(FileNotFoundError):
        iter_history("nope", root=tmp_path / "runs")


def test_export_matches_render_idps_csv_byte_for_byte(tmp_path: Path) -> None:
    path = run_dir(tmp_path)
    records = epochs(0, 3, 3)
    records[1] = dataclasses.replace(records[1], lr=NAN, train_edp=NNEvaluationDataPoint(
        loss=0.1 + 0.2, error=1e-300, extra={"z": 3.0}, kind="cls", count=4, status="ok"))
    commit_all(JournalWriter(path, HistoryJournal(retention=2)), records)
    out = export_history_csv(path, tmp_path / "export.csv")
    assert out.read_bytes() == render_idps_csv(records).encode("utf-8")
    assert not list(tmp_path.glob(".export.csv.*"))  # through the atomic writer


# -- lineage ---------------------------------------------------------------------------
def make_run(root: Path, run_id: str, records: Sequence[NNIterationDataPoint], *,
             csv: bool = False, parent: str | None = None,
             resume: dict[str, object] | None = None) -> Path:
    path = root / run_id
    path.mkdir(parents=True)
    train = {} if parent is None else {"parent_run_id": parent}
    (path / "run.yaml").write_text(yaml.safe_dump({"train": train}), encoding="utf-8")
    if resume is not None:
        (path / "metadata.yaml").write_text(yaml.safe_dump({"resume": resume}),
                                            encoding="utf-8")
    if csv:
        (path / "idps.csv").write_text(render_idps_csv(records), encoding="utf-8")
    else:
        commit_all(JournalWriter(path, HistoryJournal(retention=3, chunk_size=2)), records)
    return path


def resumed(source: str, epoch: int | None, checkpoint: str = "last") -> dict[str, object]:
    out: dict[str, object] = {"mode": "stateful", "source_run": source,
                              "source_checkpoint": checkpoint}
    if epoch is not None:
        out["source_epoch"] = epoch
    return out


@pytest.mark.parametrize("parent_csv", [True, False], ids=["csv-parent", "journal-parent"])
def test_lineage_prefixes_the_parent_up_to_the_branch_epoch(tmp_path: Path,
                                                            parent_csv: bool) -> None:
    root = tmp_path / "runs"
    parent = epochs(0, 6, 2)  # the parent went on to epoch 5; the child branched at 2
    make_run(root, "P", parent, csv=parent_csv)
    child = epochs(3, 2, 2, start=100)
    make_run(root, "C", child, parent="P", resume=resumed("P", 2))
    grandchild = epochs(5, 1, 2, start=200)
    make_run(root, "G", grandchild, parent="C", resume=resumed("C", 4))
    assert states(iter_history("C", root=root)) == states(child)
    assert states(iter_history("P", root=root)) == states(parent)  # CSV runs read too
    expected = parent[:6] + child
    assert states(iter_history("C", root=root, lineage=True)) == states(expected)
    assert states(iter_history("G", root=root, lineage=True)) == states(expected + grandchild)
    assert [r.epoch for r in iter_history(root / "G", lineage=True)] == [0, 0, 1, 1, 2, 2,
                                                                         3, 3, 4, 4, 5, 5]
    out = export_history_csv("C", tmp_path / "c.csv", root=root, lineage=True)
    assert out.read_text() == render_idps_csv(expected)
    assert (root / "P" / ("idps.csv" if parent_csv else "history")).exists()


def test_lineage_cut_never_passes_the_childs_first_record(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make_run(root, "P", epochs(0, 6, 1))
    make_run(root, "C", epochs(2, 2, 1, start=50), parent="P", resume=resumed("P", 4))
    assert [r.epoch for r in iter_history("C", root=root, lineage=True)] == [0, 1, 2, 3]
    # no committed record yet: the branch epoch alone cuts
    make_run(root, "D", [], parent="P", resume=resumed("P", 3))
    assert [r.epoch for r in iter_history("D", root=root, lineage=True)] == [0, 1, 2, 3]


def test_lineage_branch_epoch_from_the_checkpoint_when_not_recorded(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    parent = make_run(root, "P", epochs(0, 5, 1))
    (parent / "checkpoints").mkdir()
    torch.save({"epoch": 1}, parent / "checkpoints" / "q1.pt")
    make_run(root, "C", epochs(3, 1, 1), parent="P", resume=resumed("P", None, "q1"))
    assert [r.epoch for r in iter_history("C", root=root, lineage=True)] == [0, 1, 3]


def test_lineage_fallbacks_warn(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make_run(root, "P", epochs(0, 5, 1))
    # branch epoch unknowable (no such checkpoint): the parent's records before the child's
    make_run(root, "C", epochs(3, 1, 1), parent="P", resume=resumed("P", None))
    with pytest.warns(RuntimeWarning, match="unknowable"):
        assert [r.epoch for r in iter_history("C", root=root, lineage=True)] == [0, 1, 2, 3]
    # ... and with no child record either: start at the child
    make_run(root, "E", [], parent="P", resume=resumed("P", None))
    with pytest.warns(RuntimeWarning, match="neither"):
        assert list(iter_history("E", root=root, lineage=True)) == []
    make_run(root, "G", epochs(3, 1, 1), parent="gone", resume=resumed("gone", 2))
    with pytest.warns(RuntimeWarning, match="gone"):
        assert [r.epoch for r in iter_history("G", root=root, lineage=True)] == [3]
    make_run(root, "B", epochs(3, 1, 1), parent="best", resume=resumed("best", 2))
    with pytest.warns(RuntimeWarning, match="runs/best"):
        assert [r.epoch for r in iter_history("B", root=root, lineage=True)] == [3]


def test_a_run_that_started_fresh_has_only_its_own_lineage(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    make_run(root, "T", epochs(0, 3, 1))
    # a born-again student names its teacher as parent but restored nothing
    make_run(root, "S", epochs(0, 2, 1), parent="T")
    make_run(root, "F", epochs(0, 2, 1), parent="T", resume={"mode": "fresh"})
    for student in ("S", "F"):
        assert [r.epoch for r in iter_history(student, root=root, lineage=True)] == [0, 1]


# -- migration -------------------------------------------------------------------------
def csv_run(tmp_path: Path, records: Sequence[NNIterationDataPoint]) -> Path:
    path = run_dir(tmp_path, "m")
    (path / "idps.csv").write_text(render_idps_csv(records), encoding="utf-8")
    return path


def test_migrate_history_round_trip(tmp_path: Path) -> None:
    records = epochs(0, 3, 3)
    records[2] = dataclasses.replace(records[2], lr=0.1 + 0.2, train_edp=NNEvaluationDataPoint(
        loss=1 / 3, error=5e-324, metrics={"auc": 2 / 3}))
    path = csv_run(tmp_path, records)
    text = (path / "idps.csv").read_text()
    run_yaml = (path / "run.yaml").read_bytes()
    manifest = migrate_history("m", spec=HistoryJournal(retention=4, chunk_size=2),
                               root=tmp_path / "runs")
    assert not (path / "idps.csv").exists() and (path / "run.yaml").read_bytes() == run_yaml
    assert (manifest.records, manifest.epochs, manifest.chunks) == (9, 3, 6)
    assert read_manifest(path) == manifest
    got = list(iter_history("m", root=tmp_path / "runs"))
    assert states(got) == states(read_idps_csv(text))
    assert got[2].lr == 0.1 + 0.2 and got[2].train_edp.error == 5e-324  # type: ignore[union-attr]
    export_history_csv("m", tmp_path / "back.csv", root=tmp_path / "runs")
    assert (tmp_path / "back.csv").read_text() == text
    assert [r["records"] for r in read_epochs(path)] == [3, 3, 3]
    again = migrate_history("m", spec=HistoryJournal(retention=4), root=tmp_path / "runs")
    assert again == manifest  # already migrated: left as it is


def test_migrate_history_refusals(tmp_path: Path) -> None:
    records = epochs(0, 4, 2)
    path = csv_run(tmp_path, records)
    root = tmp_path / "runs"
    spec = HistoryJournal(retention=4)
    os.symlink(path, root / "best")
    before = snapshot(path)
    with pytest.raises(ValueError, match="own id"):
        migrate_history("best", spec=spec, root=root)
    with pytest.raises(RuntimeError, match="lease"):
        migrate_history("m", spec=spec, root=root, is_leased=lambda run_id: run_id == "m")
    write_last(path, 1)
    before = snapshot(path)
    with pytest.raises(ValueError, match="past LAST's epoch 1"):
        migrate_history("m", spec=spec, root=root)
    assert snapshot(path) == before and not (path / "history").exists()
    with pytest.raises(FileNotFoundError):
        migrate_history("nope", spec=spec, root=root)
    migrate_history("m", spec=spec, root=root, discard_uncommitted=True)
    assert states(iter_history("m", root=root)) == states(records[:4])
    assert not (path / "idps.csv").exists()


def test_migrate_history_replaces_a_leftover_and_finishes_an_interrupted_run(
        tmp_path: Path) -> None:
    records = epochs(0, 2, 3)
    path = csv_run(tmp_path, records)
    root = tmp_path / "runs"
    text = (path / "idps.csv").read_text()
    (path / "history").mkdir()
    (path / "history" / "chunk-00000000.jsonl").write_bytes(b"junk from a killed migration")
    (path / "history" / "index.jsonl").write_bytes(b"{")
    manifest = migrate_history("m", spec=HistoryJournal(retention=2), root=root)
    assert states(iter_history("m", root=root)) == states(records)
    # interrupted after publishing, before removing the CSV: finished without rewriting
    (path / "idps.csv").write_text(text)
    journal = snapshot(path / "history")
    assert migrate_history("m", spec=HistoryJournal(retention=2), root=root) == manifest
    assert not (path / "idps.csv").exists() and snapshot(path / "history") == journal
    # a CSV that disagrees with the published journal is kept
    (path / "idps.csv").write_text(render_idps_csv(records[:1]))
    with pytest.raises(HistoryCorruptionError):
        migrate_history("m", spec=HistoryJournal(retention=2), root=root)
    assert (path / "idps.csv").exists()


# -- the window ------------------------------------------------------------------------
def test_history_window_is_a_live_read_only_sequence(tmp_path: Path) -> None:
    writer = JournalWriter(run_dir(tmp_path), HistoryJournal(retention=3, chunk_size=2))
    window = writer.window
    assert isinstance(window, HistoryWindow) and len(window) == 0 and list(window) == []
    records = epoch_of(0, 5, 0)
    writer.append(records[0])
    assert len(window) == 1 and window[0] is records[0]
    for r in records[1:]:
        writer.append(r)
    assert len(window) == 3 and window == records[2:]
    assert window[0] is records[2] and window[-1] is records[4] and window[-3] is records[2]
    assert list(reversed(window)) == records[:1:-1]
    sliced = window[1:]
    assert isinstance(sliced, list) and sliced == records[3:] and window[::-1] == records[:1:-1]
    sliced.clear()
    assert len(window) == 3
    assert records[3] in window and window.index(records[4]) == 2
    with pytest.raises(IndexError):
        window[3]
    with pytest.raises(TypeError):
        window[0] = records[0]  # type: ignore[index]
    with pytest.raises(TypeError):
        del window[0]  # type: ignore[attr-defined]
    for name in ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"):
        assert not hasattr(window, name)
    with pytest.raises(TypeError):
        window += [records[0]]  # type: ignore[operator]
    writer.commit_epoch(0, epoch_summary(records[-1]))
    assert window == records[2:]
