"""The fixed cost of an epoch's commit (issue 15) without a weaker answer (spec §4, §4.1,
§4.2, §14.3): runs/best promotes from the score kept beside the pointer, and never
on a stale or forged one."""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import pytest
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

import nnx._persistence.best as best_module
from nnx import (
    Callback,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNRun,
    NNTrainParams,
)
from nnx._foundation.locking import file_lock
from nnx._persistence.best import (
    SCORE_NAME,
    candidate_score,
    current_best,
    elect_best,
    promote_best,
    recorded_score,
    run_score,
)

make_model = functools.partial(tiny_model, hidden=6)


def _run(root: Path, salt: str, errors: list[float]) -> NNRun:
    """A run whose validation error is scripted per epoch (BEST scores it)."""
    def evaluate(ctx):
        return NNEvaluationDataPoint(error=errors[ctx.epoch_idx], loss=1.0)

    params = NNTrainParams(n_epochs=len(errors), train_loader=tiny_batches(),
                           val_loader=tiny_batches(1), optim=sgd(), scheduler=None)
    return make_model().train(params, eval_step_fn=evaluate, salt=salt, root=root,
                              verbose=False)


def _record(root: Path) -> dict:
    return json.loads((root / SCORE_NAME).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """Three finished runs: a (0.3), b (0.2, the owner), c (0.5)."""
    root = tmp_path_factory.mktemp("best") / "runs"
    a, b, c = (_run(root, salt, errors) for salt, errors in (
        ("a", [0.4, 0.3]), ("b", [0.2]), ("c", [0.5])))
    return root, a.id, b.id, c.id


@pytest.fixture
def root(three, tmp_path):
    """A private copy of the three runs (tests edit the record)."""
    import shutil

    copy = tmp_path / "runs"
    shutil.copytree(three[0], copy, symlinks=True)
    return copy


def _exact_only(monkeypatch) -> list[str]:
    """Record which incumbents the exact path reads."""
    read: list[str] = []
    exact = best_module.run_score

    def spy(run_dir):
        read.append(run_dir.name)
        return exact(run_dir)

    monkeypatch.setattr(best_module, "run_score", spy)
    return read


def test_the_hand_over_records_the_owner_s_score_beside_the_pointer(three):
    root, _, b, _ = three
    assert current_best(root) == b
    doc = _record(root)
    manifest = json.loads((root / b / "checkpoints" / "best.pt.manifest.json").read_text())
    assert doc["run"] == b and doc["score"] == pytest.approx(0.2)
    assert (doc["checkpoint_id"], doc["generation"]) == (manifest["checkpoint_id"],
                                                         manifest["generation"])
    assert recorded_score(root, b) == pytest.approx(run_score(root / b))


def test_a_promotion_that_does_not_win_reads_no_run(root, monkeypatch):
    b = current_best(root)
    read = _exact_only(monkeypatch)
    others = [p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()
              and not p.name.startswith(".") and p.name != b]
    for other in others:
        with file_lock(root / ".best.lock"):
            assert promote_best(root, other, 0.25) == b
    assert read == []  # the record answered; no incumbent was loaded
    assert elect_best(root) == b


def test_the_fast_path_and_the_exact_path_give_the_same_answers(root, monkeypatch):
    b = current_best(root)
    others = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()
                    and not p.name.startswith(".") and p.name != b)
    for score in (0.9, 0.2, math.inf, 0.21):  # worse, a tie (keeps b), none, worse
        with file_lock(root / ".best.lock"):
            fast = promote_best(root, others[0], score)
        (root / SCORE_NAME).unlink()  # the exact path: no record
        with file_lock(root / ".best.lock"):
            slow = promote_best(root, others[0], score)
        assert fast == slow == b
        assert recorded_score(root, b) == pytest.approx(0.2)  # the exact path mended it


def test_a_better_score_hands_over_after_an_exact_read(root, monkeypatch):
    b = current_best(root)
    read = _exact_only(monkeypatch)
    winner = next(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()
                  and not p.name.startswith(".") and p.name != b)
    with file_lock(root / ".best.lock"):
        assert promote_best(root, winner, 0.01) == winner
    assert read == [b]  # the hand-over confirmed the incumbent on the exact path
    assert current_best(root) == winner and _record(root)["run"] == winner


def test_a_forged_high_score_cannot_promote_a_worse_run(root, monkeypatch):
    b = current_best(root)  # really 0.2
    doc = _record(root)
    (root / SCORE_NAME).write_text(json.dumps({**doc, "score": 9.0}))  # identity intact
    c = next(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()
             and (p / "run.yaml").is_file() and candidate_score(p) == pytest.approx(0.5))
    with file_lock(root / ".best.lock"):
        assert promote_best(root, c, 0.5) == b  # 0.5 < 9.0, but b really holds 0.2
    assert current_best(root) == b
    assert _record(root)["score"] == pytest.approx(0.2)  # mended from the exact read


@pytest.mark.parametrize("forgery", ["other run", "other checkpoint", "torn", "staged",
                                     "no pointer"])
def test_an_inconsistent_record_is_never_used(root, forgery):
    b = current_best(root)
    doc = _record(root)
    a = next(p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()
             and (p / "run.yaml").is_file() and p.name != b)
    checkpoints = root / b / "checkpoints"
    if forgery == "other run":
        (root / SCORE_NAME).write_text(json.dumps({**doc, "run": a, "score": 0.0}))
        assert recorded_score(root, a) is None  # runs/best does not name it
    elif forgery == "other checkpoint":  # b's BEST was replaced since: the record is stale
        (root / SCORE_NAME).write_text(json.dumps({**doc, "checkpoint_id": "0" * 32}))
    elif forgery == "torn":
        (root / SCORE_NAME).write_text(json.dumps(doc)[:20])
    elif forgery == "staged":  # a BEST publish is under way: the record may be behind it
        (checkpoints / "best.pt.manifest.json.staged").write_text("{}")
    else:
        (root / "best").unlink()
    assert recorded_score(root, b) is None


def test_an_election_reads_records_not_histories(root, monkeypatch):
    def no_history(*args, **kwargs):
        raise AssertionError("an election parsed a history")

    monkeypatch.setattr(NNRun, "load", no_history)
    runs = [p for p in root.iterdir() if p.is_dir() and not p.is_symlink()
            and not p.name.startswith(".")]
    monkeypatch.undo()
    exact = {p.name: run_score(p) for p in runs}
    monkeypatch.setattr(NNRun, "load", no_history)
    assert {p.name: candidate_score(p) for p in runs} == pytest.approx(exact)
    assert elect_best(root) == min(exact, key=lambda k: exact[k])


def test_an_election_skips_a_run_whose_history_does_not_load(three, root):
    """§4.1: a candidate has a loadable history; the election judges it from the ends."""
    _, _, owner, _ = three
    history = root / owner / "idps.csv"
    history.write_bytes(history.read_bytes().rstrip(b"\n").rsplit(b",", 3)[0] + b"\n")  # torn
    assert run_score(root / owner) is None and candidate_score(root / owner) is None
    assert elect_best(root) != owner


# -- the run's setup -----------------------------------------------------------------------
def test_the_git_probe_runs_once_per_process_and_directory(tmp_path, monkeypatch):
    import subprocess

    from nnx._foundation import environment

    calls = []
    real = subprocess.run
    monkeypatch.setattr(subprocess, "run", lambda *a, **kw: (calls.append(kw.get("cwd")),
                                                             real(*a, **kw))[1])
    environment._git_commit_in.cache_clear()
    first = environment.environment_snapshot()
    assert environment.environment_snapshot() == first and len(calls) == 1
    monkeypatch.chdir(tmp_path)  # another directory may be another repository
    environment.environment_snapshot()
    assert calls == [calls[0], str(tmp_path)]
    environment._git_commit_in.cache_clear()


# -- BEST shares LAST's training state -------------------------------------------------------


def _scripted(errors: list[float], **changes) -> NNTrainParams:
    return NNTrainParams(n_epochs=len(errors), train_loader=tiny_batches(),
                         val_loader=tiny_batches(1), optim=sgd(), scheduler=None, **changes)


def _evaluate(errors):
    def evaluate(ctx):
        return NNEvaluationDataPoint(error=errors[ctx.epoch_idx], loss=1.0)
    return evaluate


def test_best_committed_with_last_shares_its_sidecar_and_serializes_it_once(tmp_path,
                                                                              monkeypatch):
    from nnx._persistence import resume_point

    serialized, real = [], resume_point.serialized
    monkeypatch.setattr(resume_point, "serialized", lambda f: (serialized.append(1),
                                                               real(f))[1])
    errors = [0.5, 0.4, 0.3]
    run = make_model().train(_scripted(errors), eval_step_fn=_evaluate(errors),
                             root=tmp_path / "runs", verbose=False)
    assert len(serialized) == 3  # one training state per epoch: LAST's (FIRST, BEST share it)
    ckdir = run.checkpoints_dir
    last, best = (NNCheckpoint.verify(run.id, tag, root=run.root) for tag in ("last", "best"))
    assert (best.generation, best.checkpoint_id) == (last.generation, last.checkpoint_id)
    assert best.files["sidecar"]["sha256"] == last.files["sidecar"]["sha256"]
    assert (ckdir / best.sidecar).samefile(ckdir / last.sidecar)
    checkpoint = NNCheckpoint.load(run.id, "best", root=run.root)
    assert (checkpoint.tag, checkpoint.epoch, checkpoint.sidecar) == (
        "best", 2, f"best.pt.opt.{best.generation}.pt")
    assert checkpoint.training_state()["generation"] == best.generation
    first = NNCheckpoint.verify(run.id, "first", root=run.root)
    assert first is not None and first.generation == 1


def test_a_shared_sidecar_outlives_last_moving_on(tmp_path):
    errors = [0.5, 0.2, 0.3, 0.4]  # BEST at epoch 1; LAST moves on twice
    run = make_model().train(_scripted(errors), eval_step_fn=_evaluate(errors),
                             root=tmp_path / "runs", verbose=False)
    best = NNCheckpoint.verify(run.id, "best", root=run.root)
    assert best is not None and best.position["completed_epoch"] == 1
    names = {p.name for p in run.checkpoints_dir.iterdir()}
    assert best.sidecar in names and f"last.pt.opt.{best.generation}.pt" not in names
    state = NNCheckpoint.load(run.id, "best", root=run.root).training_state()
    assert state["epoch"] == 1 and state["generation"] == best.generation
    # The point resumes like any other.
    child = make_model().train(
        _scripted(errors, resume_from_run_id=run.id, resume_from_checkpoint="best",
                  resume_mode="stateful"),
        eval_step_fn=_evaluate([0.0] * 8), root=run.root, verbose=False)
    assert child.resume_status.source_epoch == 1


def test_last_carries_the_epoch_s_best_score_so_a_resume_judges_like_the_straight_run(
        tmp_path):
    class StopAfter(Callback):
        def on_epoch_end(self, ctx):
            if ctx.epoch == 1:
                ctx.should_stop = True

    errors = [0.5, 0.2, 0.3]  # epoch 2 is no improvement over epoch 1
    root = tmp_path / "runs"
    straight = make_model().train(_scripted(errors), eval_step_fn=_evaluate(errors),
                                  root=root, salt="straight", verbose=False)
    first = make_model().train(_scripted(errors), eval_step_fn=_evaluate(errors),
                               callbacks=[StopAfter()], root=root, verbose=False)
    saved = NNCheckpoint.load(first.id, "last", root=root).training_state()
    assert saved["loop"]["best_score"] == pytest.approx(0.2)  # epoch 1's own score
    rest = make_model().train(
        _scripted(errors, resume_from_run_id=first.id, resume_mode="stateful",
                  resume_epochs="planned"),
        eval_step_fn=_evaluate(errors), root=root, verbose=False)
    final = [NNCheckpoint.load(r.id, "last", root=root).training_state()["loop"]["best_score"]
             for r in (straight, rest)]
    assert final == [pytest.approx(0.2)] * 2
