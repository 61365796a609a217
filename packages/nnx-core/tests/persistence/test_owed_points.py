"""The epoch transaction's recovery (issue 24 items 1, 2, 4, 6, 7; docs/durability.md):
the points LAST owes, the runs/best hand-over a crash cut off, the verified score
beside runs/best, and a runs/best NNx did not write."""

from __future__ import annotations

import contextlib
import functools
import io
import json
from pathlib import Path

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

import nnx._engine.epoch_commit as epoch_commit
import nnx._persistence.best as best_module
import nnx._persistence.best_pending as best_pending_module
from nnx import NNCheckpoint, NNEvaluationDataPoint, NNTrainParams
from nnx._foundation.safe_paths import UnsafePathError
from nnx._persistence.best import current_best, recorded_score
from nnx._persistence.best_pending import PENDING_DIR, pending_runs
from nnx._persistence.best_score import SCORE_NAME, read_score
from nnx._persistence.point_manifest import read_point
from nnx.callbacks import Callback
from nnx.cli import main

make_model = functools.partial(tiny_model, hidden=6)


class Cut(Exception):
    """An exception in the commit after LAST: what a crash or a full disk leaves."""


def _params(n_epochs: int, **kw) -> NNTrainParams:
    kw.setdefault("train_loader", tiny_batches())
    return NNTrainParams(n_epochs=n_epochs, optim=sgd(), scheduler=None,
                         val_loader=tiny_batches(1), **kw)


def _scripted(errors):
    def evaluate(ctx):
        return NNEvaluationDataPoint(error=errors[ctx.epoch_idx], loss=1.0)
    return evaluate


def _train(root: Path, salt: str, errors, **kw):
    train = dict(kw.pop("train", {}))
    return make_model().train(_params(train.pop("n_epochs", len(errors)), **train),
                              eval_step_fn=_scripted(errors), salt=salt, root=root,
                              verbose=False, **kw)


@contextlib.contextmanager
def _failing(monkeypatch, *, tag: str, epoch: int | None = None, where: str = "checkpoint"):
    """``EpochCommit.save_point`` (or the promotion) raises for ``tag`` at ``epoch``."""
    if where == "checkpoint":
        original = epoch_commit.EpochCommit.save_point

        def save_point(self, point, *args, **kwargs):
            at = point.checkpoint.epoch
            if point.tag == tag and (epoch is None or at == epoch):
                raise Cut(f"{point.tag} of epoch {at}")
            return original(self, point, *args, **kwargs)

        monkeypatch.setattr(epoch_commit.EpochCommit, "save_point", save_point)
    else:
        def promote(*args, **kwargs):
            raise Cut("the hand-over")

        monkeypatch.setattr(epoch_commit, "promote_best", promote)
    yield
    monkeypatch.undo()


def _cli(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(list(argv))
    return rc, out.getvalue()


def _same_weights(a: NNCheckpoint, b: NNCheckpoint) -> bool:
    return a.state_dict.keys() == b.state_dict.keys() and all(
        torch.equal(a.state_dict[k], b.state_dict[k]) for k in a.state_dict)


# -- what LAST owes --------------------------------------------------------------------------


def test_last_lists_the_points_its_epoch_commits_after_it_and_best_records_its_score(tmp_path):
    run = _train(tmp_path, "a", [0.5, 0.4, 0.6])
    checkpoints = run.checkpoints_dir
    last = read_point(checkpoints / "last.pt")
    assert last is not None and last.position["completed_epoch"] == 2
    assert "owes" not in last.position  # epoch 2 did not improve: it owes nothing
    best = read_point(checkpoints / "best.pt")
    assert best is not None and best.position["score"] == 0.4
    assert "owes" not in best.position


def test_an_epoch_that_improves_owes_its_best_in_lasts_manifest(tmp_path, monkeypatch):
    with _failing(monkeypatch, tag="best", epoch=1), pytest.raises(Cut):
        _train(tmp_path, "a", [0.5, 0.4, 0.6])
    run_id = next(p.name for p in tmp_path.iterdir() if len(p.name) == 32)
    last = read_point(tmp_path / run_id / "checkpoints" / "last.pt")
    assert last is not None and last.position["owes"]["best"] == {}
    assert NNCheckpoint.load(run_id, "best", root=tmp_path).epoch == 0  # epoch 1's is lost
    assert run_id in pending_runs(tmp_path)  # its hand-over is owed too


# -- recovery: verify --repair and resume -------------------------------------------------


def test_verify_reports_an_owed_best_and_repair_writes_it_from_last(tmp_path, monkeypatch):
    _train(tmp_path, "other", [0.45, 0.45])  # holds runs/best at 0.45
    with _failing(monkeypatch, tag="best", epoch=1), pytest.raises(Cut):
        _train(tmp_path, "a", [0.5, 0.4])  # the plan's last epoch: no resume can repair it
    run_id = next(p.name for p in tmp_path.iterdir() if len(p.name) == 32
                  and p.name != current_best(tmp_path))
    rc, out = _cli("runs", "verify", run_id, "--root", str(tmp_path))
    assert rc == 1 and "FAIL best  owed" in out
    rc, out = _cli("runs", "verify", run_id, "--root", str(tmp_path), "--repair")
    assert rc == 0 and "repaired best" in out
    best = NNCheckpoint.load(run_id, "best", root=tmp_path)
    last = NNCheckpoint.load(run_id, "last", root=tmp_path)
    assert best.epoch == 1 and best.score == 0.4 and best.tag == "best"
    assert _same_weights(best, last)
    sidecar = tmp_path / run_id / "checkpoints"
    assert (sidecar / best.sidecar).read_bytes() == (sidecar / last.sidecar).read_bytes()
    assert current_best(tmp_path) == run_id  # and the hand-over it owed
    assert pending_runs(tmp_path) == []
    assert _cli("runs", "verify", run_id, "--root", str(tmp_path))[0] == 0


def test_a_resume_first_writes_the_points_its_source_owes(tmp_path, monkeypatch):
    with _failing(monkeypatch, tag="best", epoch=1), pytest.raises(Cut):
        _train(tmp_path, "a", [0.5, 0.4, 0.6, 0.7])
    source = next(p.name for p in tmp_path.iterdir() if len(p.name) == 32)
    with pytest.warns(RuntimeWarning, match="wrote the best point"):
        child = _train(tmp_path, "a", [0.5, 0.4, 0.6, 0.7],
                       train={"resume_from_run_id": source, "resume_mode": "stateful",
                              "resume_epochs": "planned"})
    best = NNCheckpoint.load(source, "best", root=tmp_path)
    assert best.epoch == 1 and _same_weights(best, NNCheckpoint.load(source, "last",
                                                                     root=tmp_path))
    assert current_best(tmp_path) == source  # the child's epochs 2-3 score worse
    assert child.id != source


def test_phase_points_an_epoch_owes_are_written_too(tmp_path, monkeypatch):
    with _failing(monkeypatch, tag="first", epoch=0), pytest.raises(Cut):
        _train(tmp_path, "a", [0.5, 0.4])
    run_id = next(p.name for p in tmp_path.iterdir() if len(p.name) == 32)
    assert not (tmp_path / run_id / "checkpoints" / "first.pt").exists()
    rc, out = _cli("runs", "verify", run_id, "--root", str(tmp_path), "--repair")
    assert "repaired first, best" in out and rc == 0
    first = NNCheckpoint.load(run_id, "first", root=tmp_path)
    assert first.epoch == 0 and first.tag == "first"


def test_a_live_runs_points_are_not_repaired_by_another_process(tmp_path, monkeypatch):
    from nnx._foundation.locking import file_lock

    with _failing(monkeypatch, tag="best", epoch=1), pytest.raises(Cut):
        _train(tmp_path, "a", [0.5, 0.4])
    run_id = next(p.name for p in tmp_path.iterdir() if len(p.name) == 32)
    before = (tmp_path / run_id / "checkpoints" / "best.pt").read_bytes()
    with file_lock(tmp_path / ".leases" / f"{run_id}.lock"):
        rc, out = _cli("runs", "verify", run_id, "--root", str(tmp_path), "--repair")
    assert "being trained by another process" in out and rc == 0  # its own fit writes them
    assert (tmp_path / run_id / "checkpoints" / "best.pt").read_bytes() == before


# -- a hand-over a crash cut off ------------------------------------------------------------


def test_the_next_promotion_in_the_root_settles_a_cut_hand_over(tmp_path, monkeypatch):
    a = _train(tmp_path, "a", [0.5, 0.5])
    with _failing(monkeypatch, tag="best", where="promote"), pytest.raises(Cut):
        _train(tmp_path, "b", [0.2, 0.3])  # BEST 0.2 committed, never handed over
    b = next(p.name for p in tmp_path.iterdir() if len(p.name) == 32 and p.name != a.id)
    assert current_best(tmp_path) == a.id and pending_runs(tmp_path) == [b]
    _train(tmp_path, "c", [0.9, 0.8])  # a worse run's promotion reads the marked run
    assert current_best(tmp_path) == b and pending_runs(tmp_path) == []


class _MarkerWatch(Callback):
    """After each epoch's commit (a deferred action): the pending markers under the root."""

    def __init__(self, root: Path) -> None:
        self.root, self.seen = root, []

    def on_epoch_end(self, ctx) -> None:
        ctx.defer(lambda _ctx: self.seen.append(pending_runs(self.root)))


def _marker_flushes(monkeypatch) -> list[int]:
    """Every flush of the runs/.best-pending directory (the marker's one cost)."""
    flushed: list[int] = []
    original = best_pending_module.fsync_dir

    def fsync_dir(path, **kwargs):
        if Path(path).name == PENDING_DIR:
            flushed.append(1)
        return original(path, **kwargs)

    monkeypatch.setattr(best_pending_module, "fsync_dir", fsync_dir)
    return flushed


def test_a_fit_keeps_its_marker_from_its_first_best_to_its_end(tmp_path, monkeypatch):
    # Every epoch improves, so every commit writes a BEST and promotes it: the marker is
    # dropped (and its directory flushed) once, kept by each promotion, cleared at the end.
    flushed = _marker_flushes(monkeypatch)
    watch = _MarkerWatch(tmp_path)
    run = _train(tmp_path, "a", [0.5, 0.4, 0.3, 0.2], callbacks=[watch])
    assert watch.seen == [[run.id]] * 4
    assert len(flushed) == 1
    assert pending_runs(tmp_path) == [] and current_best(tmp_path) == run.id


def test_a_fit_that_fails_after_its_promotion_clears_its_marker(tmp_path, monkeypatch):
    # Epochs 0 and 1 improve and are promoted; epoch 2 does not improve and its LAST
    # fails: no promotion is owed, so the marker goes with the fit. (A LAST that fails in
    # an improving epoch keeps it: whether that LAST was published is not known here.)
    with _failing(monkeypatch, tag="last", epoch=2), pytest.raises(Cut):
        _train(tmp_path, "a", [0.5, 0.4, 0.6])
    assert pending_runs(tmp_path) == []


def test_a_fit_that_fails_before_its_promotion_keeps_its_marker(tmp_path, monkeypatch):
    # Epoch 1's BEST is committed but its hand-over is cut: the marker outlives the fit.
    _train(tmp_path, "other", [0.45, 0.45])
    original = epoch_commit.promote_best
    calls = []

    def promote(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise Cut("the hand-over of epoch 1")
        return original(*args, **kwargs)

    monkeypatch.setattr(epoch_commit, "promote_best", promote)
    with pytest.raises(Cut):
        _train(tmp_path, "a", [0.5, 0.4, 0.3])
    monkeypatch.undo()
    marked = pending_runs(tmp_path)
    assert len(marked) == 1 and current_best(tmp_path) != marked[0]
    _train(tmp_path, "c", [0.9, 0.8])  # the next promotion in the root settles it
    assert current_best(tmp_path) == marked[0] and pending_runs(tmp_path) == []


def test_an_election_settles_every_marker(tmp_path, monkeypatch):
    a = _train(tmp_path, "a", [0.5, 0.5])
    with _failing(monkeypatch, tag="best", where="promote"), pytest.raises(Cut):
        _train(tmp_path, "b", [0.2, 0.3])
    (tmp_path / SCORE_NAME).unlink()
    (tmp_path / "best").unlink()
    assert best_module.elect_best(tmp_path) != a.id
    assert pending_runs(tmp_path) == []


# -- the score beside runs/best -------------------------------------------------------------


def _score_doc(root: Path) -> dict:
    return json.loads((root / SCORE_NAME).read_text())


def test_one_changed_digit_in_the_score_record_is_ignored_and_rewritten(tmp_path):
    a = _train(tmp_path, "a", [0.25, 0.5])
    doc = _score_doc(tmp_path)
    assert recorded_score(tmp_path, a.id) == 0.25
    (tmp_path / SCORE_NAME).write_text(json.dumps({**doc, "score": 0.95}))
    assert read_score(tmp_path, a.id) is None  # its digest no longer matches
    forged = {**doc, "score": 0.95}
    import hashlib

    from nnx._foundation.hashing import canonical_bytes

    fields = {k: v for k, v in forged.items() if k != "sha256"}
    forged["sha256"] = hashlib.sha256(canonical_bytes(fields)).hexdigest()
    (tmp_path / SCORE_NAME).write_text(json.dumps(forged))
    assert read_score(tmp_path, a.id) is None  # BEST's manifest records 0.25
    b = _train(tmp_path, "b", [0.5, 0.5])  # worse than 0.25, better than the forged 0.95
    assert current_best(tmp_path) == a.id and b.id != a.id
    assert _score_doc(tmp_path)["score"] == 0.25  # mended from the exact read


@pytest.mark.parametrize("content", ["[" * 200_000, "{" * 50 + "}" * 50, "x" * 10_000])
def test_a_deep_huge_or_garbled_score_record_never_stops_training(tmp_path, content):
    a = _train(tmp_path, "a", [0.5, 0.5])
    (tmp_path / SCORE_NAME).write_text(content)
    _train(tmp_path, "b", [0.4, 0.4])
    assert current_best(tmp_path) != a.id
    assert _score_doc(tmp_path)["score"] == 0.4


def test_a_symlinked_score_record_is_replaced_never_written_through(tmp_path):
    root, outside = tmp_path / "runs", tmp_path / "outside.txt"
    outside.write_text("the user's file\n")
    root.mkdir()
    (root / SCORE_NAME).symlink_to(outside)
    _train(root, "a", [0.5, 0.5])
    assert outside.read_text() == "the user's file\n"
    assert not (root / SCORE_NAME).is_symlink() and _score_doc(root)["score"] == 0.5


# -- runs/best NNx did not write, and links below the root ----------------------------------


def _tree(path: Path) -> dict[str, bytes | None]:
    return {p.relative_to(path).as_posix(): (p.read_bytes() if p.is_file() else None)
            for p in sorted(path.rglob("*"))}


def test_a_real_directory_at_runs_best_is_refused_and_kept(tmp_path):
    root = tmp_path / "runs"
    (root / "best").mkdir(parents=True)
    (root / "best" / "notes.txt").write_text("mine")
    before = _tree(root)
    with pytest.raises(UnsafePathError, match="never deletes"):
        _train(root, "a", [0.5])
    assert _tree(root) == before  # nothing reserved, the user's files untouched


def test_a_symlinked_leases_directory_is_refused(tmp_path):
    root, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / ".leases").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafePathError, match="symbolic link"):
        _train(root, "a", [0.5])
    assert list(elsewhere.iterdir()) == []
    assert [p.name for p in root.iterdir()] == [".leases"]


def test_a_symlinked_pending_directory_is_refused_before_last(tmp_path):
    root, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    root.mkdir()
    elsewhere.mkdir()
    (root / PENDING_DIR).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafePathError):
        _train(root, "a", [0.5])
    assert list(elsewhere.iterdir()) == []


def test_runs_best_is_read_by_its_targets_name(tmp_path):
    a = _train(tmp_path, "a", [0.5, 0.4])
    assert NNCheckpoint.load("best", "best", root=tmp_path).run_id == a.id
    child = _train(tmp_path, "a", [0.5, 0.4, 0.6],
                   train={"resume_from_run_id": "best", "resume_mode": "stateful",
                          "n_epochs": 1})  # one more epoch after BEST's (epoch 1)
    assert [r.epoch for r in child.epoch_records()] == [2]
    assert child.resume_status.source_run == "best"  # as asked; its lineage starts here


def test_a_runs_best_link_to_elsewhere_names_no_run(tmp_path):
    a = _train(tmp_path, "a", [0.5, 0.4])
    foreign = tmp_path.parent / f"{tmp_path.name}-foreign"
    (foreign / a.id).mkdir(parents=True)
    (tmp_path / "best").unlink()
    (tmp_path / "best").symlink_to(foreign / a.id)  # an absolute target, not a sibling
    with pytest.raises(FileNotFoundError, match="names no run"):
        NNCheckpoint.load("best", "best", root=tmp_path)
    assert current_best(tmp_path) is None
