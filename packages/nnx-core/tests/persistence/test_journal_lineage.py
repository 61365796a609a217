"""The history journal's lineage (spec §4.5, §14): a resumed run's history prefixes its
parent's up to the branch epoch."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _support.history_journal import (
    epochs,
    make_run,
    resumed,
    states,
)

from nnx._journal.history_csv import render_idps_csv
from nnx.history import (
    export_history_csv,
    iter_history,
)


# -- lineage ---------------------------------------------------------------------------
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
