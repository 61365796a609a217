"""Reading the history journal (spec §4.5): corruption raises and modifies nothing, tail
reads, the filter at LAST, the byte-exact CSV export, and the live window."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from _support.history_journal import (
    NAN,
    commit_all,
    epoch_of,
    epochs,
    run_dir,
    snapshot,
    states,
    write_last,
)

from nnx._foundation.records import NNEvaluationDataPoint
from nnx._journal.history_csv import render_idps_csv
from nnx.history import (
    HistoryCorruptionError,
    HistoryJournal,
    HistoryWindow,
    JournalWriter,
    check_history,
    epoch_summary,
    export_history_csv,
    iter_history,
    read_epochs,
    read_manifest,
    read_tail,
)


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
