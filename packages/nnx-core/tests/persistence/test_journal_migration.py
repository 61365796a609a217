"""Migrating a run's idps.csv history into a journal (spec §4.5): round trip, refusals,
a leftover replaced and an interrupted migration finished."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import pytest
from _support.history_journal import (
    epochs,
    run_dir,
    snapshot,
    states,
    write_last,
)

from nnx._foundation.records import NNEvaluationDataPoint, NNIterationDataPoint
from nnx._journal.history_csv import read_idps_csv, render_idps_csv
from nnx.history import (
    HistoryCorruptionError,
    HistoryJournal,
    export_history_csv,
    iter_history,
    migrate_history,
    read_epochs,
    read_manifest,
)


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
