"""What a kill leaves behind is removed, and an empty reservation is reclaimed (issue item 10;
docs/durability.md, Repair and leftovers).

``nnx runs verify --repair`` removes the temps NNx names (``.<file>.<8 hex>``:
checkpoints, sidecars, compatibility links, staged manifests, idps.csv, journal
files), settles staged manifests as the next save would, and drops journal chunks
past what journal.json publishes, under the run's lease only; a resume writes
nothing to its source, leftovers included. A directory a fit reserved and was
killed in before run.yaml is listed as ``incomplete`` and reclaimed by a plain
retry; a directory holding anything else is still refused.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import NNCheckpoint, NNRun, NNTrainParams
from nnx._foundation.locking import file_lock
from nnx._foundation.safe_paths import UnsafePathError
from nnx._persistence.leftovers import find_leftovers, remove_leftovers
from nnx._persistence.reservation import RunExistsError, is_empty_reservation
from nnx.cli import main
from nnx.history import HistoryJournal

HEX = "0123abcd"


def params(n_epochs: int = 2, **changes) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=tiny_batches(), scheduler=None,
                         optim=sgd(), **changes)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands here
    return tmp_path


def snapshot(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def plant(run_dir):
    """What kills at different moments leave: each name relative to the run directory."""
    cp = run_dir / "checkpoints"
    planted = {
        f"checkpoints/.last.pt.{HEX}": (cp / "last.pt").read_bytes(),  # checkpoint-sized
        f"checkpoints/.last.pt.opt.3.pt.{HEX}": b"half a sidecar",
        f"checkpoints/.last.pt.manifest.json.staged.{HEX}": b"{",
        f".idps.csv.{HEX}": (run_dir / "idps.csv").read_bytes(),
        f".metadata.yaml.{HEX}": b"environment: {}\n",
    }
    for name, data in planted.items():
        (run_dir / name).write_bytes(data)
    os.link(cp / "last.pt.opt.2.pt", cp / f".last.pt.opt.pt.{HEX}")  # a link temp
    # A staged manifest that matches nothing: the publish it began never completed.
    (cp / "best.pt.manifest.json.staged").write_text(
        (cp / "best.pt.manifest.json").read_text().replace('"generation": ', '"generation": 9'))
    return sorted([*planted, f"checkpoints/.last.pt.opt.pt.{HEX}",
                   "checkpoints/best.pt.manifest.json.staged"])


def test_verify_reports_leftovers_and_repair_removes_only_them(capsys):
    run = tiny_model().train(params(), verbose=False)
    root, run_dir = "runs", os.path.join("runs", run.id)
    clean = snapshot(run_dir_path := run.path)
    planted = plant(run_dir_path)
    assert find_leftovers(root, run.id) == planted
    dirty = snapshot(run_dir_path)

    capsys.readouterr()
    assert main(["runs", "verify", run.id]) == 0  # leftovers are no failure
    out = capsys.readouterr().out
    assert "warn leftovers" in out and f".last.pt.{HEX}" in out and "--repair" in out
    assert snapshot(run_dir_path) == dirty  # without --repair nothing is touched

    assert main(["runs", "verify", run.id, "--repair"]) == 0
    out = capsys.readouterr().out
    link_temp = f"checkpoints/.last.pt.opt.pt.{HEX}"  # the point's own orphan: its own line
    assert f"repaired last  removed .last.pt.opt.pt.{HEX}" in out
    swept = next(line for line in out.splitlines() if line.startswith("repaired leftovers"))
    for name in planted:
        assert (name in swept) is (name != link_temp)
    assert "best.pt.manifest.json.staged (removed)" in out
    assert snapshot(run_dir_path) == clean  # exactly the leftovers went
    assert find_leftovers(root, run.id) == [] and os.path.isdir(run_dir)
    assert main(["runs", "verify", run.id]) == 0 and "warn" not in capsys.readouterr().out
    assert len(NNRun.load(run.id).idps) == 4


def test_repair_makes_a_matching_staged_manifest_live():
    """A writer killed after publishing the checkpoint, before making its manifest live."""
    run = tiny_model().train(params(), verbose=False)
    cp = run.checkpoints_dir
    live = (cp / "last.pt.manifest.json").read_bytes()
    os.replace(cp / "last.pt.manifest.json", cp / "last.pt.manifest.json.staged")
    assert remove_leftovers("runs", run.id) == ["checkpoints/last.pt.manifest.json.staged "
                                                "(made live)"]
    assert (cp / "last.pt.manifest.json").read_bytes() == live
    assert not (cp / "last.pt.manifest.json.staged").exists()


def test_a_staged_manifest_of_a_point_that_does_not_verify_is_left_as_evidence(capsys):
    run = tiny_model().train(params(), verbose=False)
    cp = run.checkpoints_dir
    (cp / "last.pt.manifest.json.staged").write_text("{}")
    (cp / "last.pt").write_bytes(b"torn")  # neither manifest verifies now
    before = snapshot(run.path)
    capsys.readouterr()
    assert main(["runs", "verify", run.id, "--repair"]) == 1
    assert "FAIL last" in capsys.readouterr().out
    assert snapshot(run.path) == before


def test_repair_under_a_held_lease_leaves_the_leftovers(capsys):
    run = tiny_model().train(params(), verbose=False)
    plant(run.path)
    before = snapshot(run.path)
    link_temp = run.checkpoints_dir / f".last.pt.opt.pt.{HEX}"
    # A fit of the run (here: this process) holds the lease: its temps may be live.
    with file_lock(os.path.join("runs", ".leases", f"{run.id}.lock"), root="runs"):
        assert remove_leftovers("runs", run.id) is None
        assert snapshot(run.path) == before
        capsys.readouterr()
        assert main(["runs", "verify", run.id, "--repair"]) == 0
        out = capsys.readouterr().out
    assert "skipped leftovers  run " in out and "lease is held" in out
    # Only the point's own orphans went, as before: repair_point holds the tag's lock,
    # which a writer of the tag holds for its whole save.
    assert f"repaired last  removed {link_temp.name}" in out
    assert snapshot(run.path) == {p: d for p, d in before.items() if p != link_temp}


def test_repair_refuses_a_planted_link_and_removes_nothing_through_it(tmp_path, capsys):
    run = tiny_model().train(params(), verbose=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / f".precious.{HEX}").write_text("not NNx's")
    shutil.rmtree(run.path / "history", ignore_errors=True)
    (run.path / "history").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError):
        remove_leftovers("runs", run.id)
    capsys.readouterr()
    assert main(["runs", "verify", run.id, "--repair"]) == 1
    assert "FAIL leftovers  UnsafePathError" in capsys.readouterr().out
    assert (elsewhere / f".precious.{HEX}").read_text() == "not NNx's"


def test_repair_removes_journal_temps_and_unpublished_chunks():
    run = tiny_model().train(params(), verbose=False,
                             history=HistoryJournal(retention=4, chunk_size=1))
    hdir = run.path / "history"
    published = snapshot(hdir)
    chunks = sorted(p.name for p in hdir.glob("chunk-*.jsonl"))
    assert len(chunks) == 4
    (hdir / "chunk-00000004.jsonl").write_bytes(b'{"epoch": 2}\n')  # written, never indexed
    (hdir / f".journal.json.{HEX}").write_text("{}")
    (hdir / f".chunk-00000005.jsonl.{HEX}").write_text("")
    assert remove_leftovers("runs", run.id) == [
        f"history/.chunk-00000005.jsonl.{HEX}", f"history/.journal.json.{HEX}",
        "history/chunk-00000004.jsonl"]
    assert snapshot(hdir) == published


def test_a_resume_removes_its_sources_leftovers_and_writes_nothing_else():
    """A resume writes no data to its source (spec §14.3); it does remove what the
    source's own killed writers stranded, exactly what --repair would (issue 24)."""
    source = tiny_model().train(params(), verbose=False)
    clean = snapshot(source.path)
    planted = plant(source.path)
    assert find_leftovers("runs", source.id) == planted
    child = tiny_model().train(params(1, resume_from_run_id=source.id), verbose=False)
    assert [r.epoch for r in child.epoch_records()] == [2]
    assert snapshot(source.path) == clean
    assert find_leftovers("runs", source.id) == []


# -- the empty reservation ---------------------------------------------------------------
def reservation(run_dir, *extra):
    """What FitLoop._reserve leaves when killed before run.yaml is renamed into place."""
    (run_dir / "checkpoints").mkdir(parents=True)
    (run_dir / ".history-committed-by-last").write_bytes(b"")
    (run_dir / ".run.lock").write_bytes(b"")
    (run_dir / f".run.yaml.{HEX}").write_text("model: {}\n")
    for name in extra:
        path = run_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("kept")


def test_an_empty_reservation_is_listed_incomplete_and_a_plain_retry_reclaims_it(capsys):
    first = tiny_model().train(params(), verbose=False)
    shutil.rmtree(first.path)
    reservation(first.path)
    assert is_empty_reservation(first.path)
    capsys.readouterr()
    assert main(["runs", "list"]) == 0  # incomplete is not damage
    row = capsys.readouterr().out.splitlines()[1]
    assert row.split()[:4] == [first.id, "-", "0", "incomplete"]
    again = tiny_model().train(params(), verbose=False)  # no RunExistsError
    assert again.id == first.id and len(NNRun.load(first.id).idps) == 4
    assert not list(first.path.glob(".run.yaml.*"))
    assert main(["runs", "list"]) == 0 and "committed" in capsys.readouterr().out


@pytest.mark.parametrize("extra", ["notes.txt", "checkpoints/last.pt", "metadata.yaml",
                                   "history/chunk-00000000.jsonl", ".history-committed-by-last"])
def test_a_reservation_holding_anything_else_is_still_refused(extra):
    first = tiny_model().train(params(), verbose=False)
    shutil.rmtree(first.path)
    reservation(first.path, extra)  # the marker written non-empty is not ours either
    assert not is_empty_reservation(first.path)
    before = snapshot(first.path)
    with pytest.raises(RunExistsError):
        tiny_model().train(params(), verbose=False)
    assert snapshot(first.path) == before


def test_an_empty_reservation_behind_a_link_is_never_reclaimed(tmp_path):
    first = tiny_model().train(params(), verbose=False)
    shutil.rmtree(first.path)
    target = tmp_path / "target"
    reservation(target)
    first.path.symlink_to(target)
    assert not is_empty_reservation(first.path)
    with pytest.raises(RunExistsError):
        tiny_model().train(params(), verbose=False)
    assert (target / ".history-committed-by-last").is_file()


# -- issue 36 item 3: the root's runs/best temps, and one repair pass is enough ------------
def test_repair_removes_the_roots_best_temps_and_never_a_links_target(tmp_path, capsys):
    run = tiny_model().train(params(), verbose=False)
    root = run.root
    outside = tmp_path / "kept.txt"
    outside.write_text("not NNx's")
    pointer_temp = root / f".best.4242.{'ab' * 16}"  # the hand-over's pointer link
    pointer_temp.symlink_to(outside)
    score_temp = root / f".best.4242.score.{'cd' * 8}"  # the score record's temp
    score_temp.write_text("{")
    kept = [root / ".best.lock", root / ".best-score.json", root / ".best.notes"]
    kept[2].write_text("a user's")
    before = {p: p.read_bytes() for p in kept if p.exists()}
    capsys.readouterr()
    assert main(["runs", "verify", run.id]) == 0
    out = capsys.readouterr().out
    assert f"warn root  {pointer_temp.name}, {score_temp.name} (--repair" in out
    assert os.path.lexists(pointer_temp) and score_temp.exists()
    assert main(["runs", "verify", run.id, "--repair"]) == 0
    assert f"repaired root  removed {pointer_temp.name}, {score_temp.name}" in (
        capsys.readouterr().out)
    assert not os.path.lexists(pointer_temp) and not score_temp.exists()
    assert outside.read_text() == "not NNx's"
    assert {p: p.read_bytes() for p in kept if p.exists()} == before


def test_repair_leaves_the_roots_best_temps_while_best_lock_is_held(capsys):
    run = tiny_model().train(params(), verbose=False)
    temp = run.root / f".best.4242.score.{'cd' * 8}"
    temp.write_text("{")
    with file_lock(run.root / ".best.lock", root=run.root):  # a hand-over in flight
        capsys.readouterr()
        assert main(["runs", "verify", run.id, "--repair"]) == 0
    assert "skipped root  runs/best is being handed over" in capsys.readouterr().out
    assert temp.exists()


# A fit whose epoch-1 LAST publish is killed, as SIGKILL would: no cleanup.
CUT_LAST_PUBLISH = """
import os, sys
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
import nnx._persistence.resume_point as resume_point
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from nnx import NNTrainParams

published, seen = {published!r}, []
replace, write = os.replace, resume_point.atomic_write_bytes

def cut(hit):
    if hit:
        seen.append(1)
        if len(seen) == 2:  # epoch 0's LAST publishes whole
            os._exit(137)

def killed_replace(src, dst, *args, **kwargs):
    cut(published and str(src).endswith("last.pt.manifest.json.staged"))
    return replace(src, dst, *args, **kwargs)

def killed_write(path, data, **kwargs):
    cut(not published and str(path).endswith("last.pt"))
    return write(path, data, **kwargs)

resume_point.os.replace = killed_replace
resume_point.atomic_write_bytes = killed_write
tiny_model().train(NNTrainParams(n_epochs=2, train_loader=tiny_batches(), scheduler=None,
                                 optim=sgd()), verbose=False)
sys.exit("the cut was never reached")
"""


@pytest.mark.parametrize("published", [True, False])
def test_one_repair_after_a_kill_in_lasts_publish_leaves_no_orphan_sidecar(published, capsys):
    """A kill right before LAST's staged manifest goes live (``published``: last.pt
    written, so the staged point is made live) or right before last.pt is written (the
    staged point is dropped): either way one point's sidecar is named by no manifest
    once the staged one is settled, and the same repair pass removes it."""
    # A fresh interpreter, not a fork of this pytest worker: nothing it inherited (other
    # tests' threads or patches) can keep the cut from being reached.
    child = CUT_LAST_PUBLISH.format(tests=str(Path(__file__).resolve().parents[1]),
                                    published=published)
    done = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 137, done.stdout + done.stderr
    (run_dir,) = [p for p in Path("runs").iterdir()
                  if not p.name.startswith(".") and p.name != "best"]
    cp = run_dir / "checkpoints"
    first = SimpleNamespace(id=run_dir.name)
    assert (cp / "last.pt.manifest.json.staged").is_file()
    capsys.readouterr()
    assert main(["runs", "verify", first.id, "--repair"]) == 0
    out = capsys.readouterr().out
    outcome = "made live" if published else "removed"
    assert f"last.pt.manifest.json.staged ({outcome}; removed last.pt.opt." in out, out
    assert find_leftovers("runs", first.id) == []
    named = NNCheckpoint.load(first.id, "last").sidecar
    assert sorted(p.name for p in cp.glob("last.pt.opt.*.pt")) == [named]
    assert main(["runs", "verify", first.id, "--repair"]) == 0
    assert "repaired" not in capsys.readouterr().out  # nothing left for a second pass
