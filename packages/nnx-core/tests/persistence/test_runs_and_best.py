"""The run directory, its history and checkpoints, BEST selection and runs/best
(spec §4, §4.1, §4.2, §6.2)."""

from __future__ import annotations

import csv
import functools
import io
import math
import os
import shutil
import warnings
from pathlib import Path

import pytest
import yaml
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import (
    Callback,
    Checkpoints,
    MonitorSpec,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNRun,
    NNTrainParams,
    default_train_step,
)
from nnx._engine.training import phase_epochs
from nnx._foundation.hashing import md5_hex
from nnx._persistence.best import current_best, elect_best, promote_best
from nnx._persistence.checkpoint import checkpoint_files

# -- helpers ----------------------------------------------------------------------------


loader = tiny_batches
make_model = functools.partial(tiny_model, hidden=6)


def params(n_epochs: int = 2, **kw) -> NNTrainParams:
    kw.setdefault("train_loader", loader())
    kw.setdefault("scheduler", None)
    return NNTrainParams(n_epochs=n_epochs, optim=sgd(), **kw)


def tags(run_dir: Path) -> dict[str, int]:
    """Checkpoint tag -> epoch of every checkpoint file (sidecars excluded)."""
    return {p.name[:-3]: NNCheckpoint.from_file(p).epoch
            for p in checkpoint_files(run_dir / "checkpoints")}


def val_errors(values):
    """An eval_step_fn reporting the scripted validation error of each epoch."""
    def evaluate(ctx):
        return NNEvaluationDataPoint(error=values[ctx.epoch_idx], loss=1.0)
    return evaluate


def scripted_train(errors=None, losses=None):
    """A step that trains for real (default_train_step) and reports scripted values."""
    def step(ctx):
        record = default_train_step(ctx)
        return NNEvaluationDataPoint(
            error=None if errors is None else errors[ctx.epoch],
            loss=record.loss if losses is None else losses[ctx.epoch])
    return step


def pointer(root: Path) -> str | None:
    """The run runs/best names, checking it never dangles."""
    best = root / "best"
    if not best.exists() and not best.is_symlink():
        return None
    assert best.is_symlink()
    target = best.resolve()
    assert target.is_dir() and (target / "run.yaml").is_file(), "runs/best dangles"
    assert (target / "checkpoints" / "best.pt").is_file()
    return os.readlink(best)


def normalized(state):
    """An idp state with NaN mapped to absent, as a CSV reads it back."""
    if isinstance(state, dict):
        out = {k: normalized(v) for k, v in state.items()}
        return {k: v for k, v in out.items() if v is not None and v != {}}
    if isinstance(state, float) and math.isnan(state):
        return None
    return state


# -- the run directory ----------------------------------------------------------------------


def test_run_directory_layout_identity_and_history(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)

    def evaluate(ctx):  # NaN values: live history keeps them, the CSV reads them back absent
        if ctx.epoch_idx == 1:
            return NNEvaluationDataPoint(loss=math.nan)  # all-NaN record: reads back as none
        return NNEvaluationDataPoint(loss=0.5, error=math.nan, extra={"gap": math.nan, "k": 2.0})

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the rejected-NaN notice
        run = make_model().train(params(2, train_loader=loader(3), val_loader=loader(1)),
                                 eval_step_fn=evaluate, verbose=None)  # prints the line
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == f"Run saved to runs/{run.id}"
    assert str(tmp_path) not in out and os.sep + "tmp" not in out

    run_dir = tmp_path / "runs" / run.id
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        [".history-committed-by-last", ".run.lock", "checkpoints", "idps.csv", "metadata.yaml",
         "run.yaml", "summary.json"])  # summary.json: the listing's (durability.md)
    doc = yaml.safe_load((run_dir / "run.yaml").read_text())
    assert md5_hex(doc) == run.id  # run.yaml hashes to the directory name
    assert "environment" not in str(doc)
    metadata = yaml.safe_load((run_dir / "metadata.yaml").read_text())
    assert "torch" in metadata["environment"]

    # metadata.yaml is not part of the id: rewriting it changes nothing.
    (run_dir / "metadata.yaml").write_text("environment: {python: elsewhere}\n")
    loaded = NNRun.load(run.id)
    assert loaded.id == run.id and loaded.metadata["environment"]["python"] == "elsewhere"

    rows = list(csv.DictReader(io.StringIO((run_dir / "idps.csv").read_text())))
    assert len(rows) == 6 == len(run.idps)  # one row per microbatch
    assert [int(r["iter_idx"]) for r in rows] == list(range(6))
    assert [normalized(i.state()) for i in loaded.idps] == [normalized(i.state())
                                                            for i in run.idps]
    assert math.isnan(run.idps[2].val_edp.error)  # live history keeps the raw NaN
    assert loaded.idps[2].val_edp.error is None
    assert loaded.idps[2].val_edp.extra == {"k": 2.0}  # a NaN extra reads back absent
    assert math.isnan(run.idps[5].val_edp.loss) and loaded.idps[5].val_edp is None
    assert loaded.idps[0].lr == run.idps[0].lr and loaded.idps[4].update_count == 5


def test_history_is_flushed_every_epoch_and_last_is_in_place(tmp_path):
    seen = []

    class Probe(Callback):
        def on_epoch_end(self, ctx):
            ctx.defer(self.committed)  # the epoch commits after on_epoch_end (§4.2)

        def committed(self, ctx):
            on_disk = NNRun.load(ctx.run.id, root=ctx.run.root)
            seen.append((len(on_disk.idps), tags(ctx.run.path)["last"]))

    make_model().train(params(3), callbacks=[Probe()], root=tmp_path / "runs", verbose=False)
    assert seen == [(2, 0), (4, 1), (6, 2)]


def test_load_truncates_history_newer_than_last(tmp_path):
    root = tmp_path / "runs"
    run = make_model().train(params(2), root=root, verbose=False)
    history = root / run.id / "idps.csv"
    rows = list(csv.DictReader(io.StringIO(history.read_text())))
    fake = dict(rows[-1], epoch="2", iter_idx="4", batch_idx="0")
    with history.open("a", newline="") as f:  # what a kill after the history write leaves
        csv.DictWriter(f, fieldnames=list(rows[0]), lineterminator="\n").writerow(fake)
    assert len(list(csv.DictReader(io.StringIO(history.read_text())))) == 5
    loaded = NNRun.load(run.id, root=root)
    assert [i.epoch for i in loaded.idps] == [0, 0, 1, 1]
    assert [r.id for r in NNRun.all(root=root)] == [run.id]


@pytest.mark.parametrize(("n_epochs", "expected"), [
    (8, {"first": 0, "q1": 1, "q2": 3, "q3": 5, "last": 7}),
    (7, {"first": 0, "q2": 2, "q3": 4, "last": 6}),
    (4, {"first": 0, "q2": 1, "q3": 2, "last": 3}),
    (2, {"first": 0, "last": 1}),
])
def test_phase_checkpoints_follow_the_quartiles(tmp_path, n_epochs, expected):
    assert {**phase_epochs(n_epochs), "last": n_epochs - 1} == expected
    run = make_model().train(params(n_epochs, train_loader=loader(1)), root=tmp_path / "runs",
                             verbose=False)
    found = tags(tmp_path / "runs" / run.id)
    best = found.pop("best")
    assert found == expected
    assert 0 <= best < n_epochs


def test_every_quartile_needs_eight_epochs():
    assert all(len(phase_epochs(n)) < 4 for n in range(1, 8))
    assert all(len(phase_epochs(n)) == 4 for n in range(8, 40))
    for n in range(1, 40):
        assert all(0 <= e < n - 1 or (tag == "first" and e == 0)
                   for tag, e in phase_epochs(n).items())


def test_without_phase_checkpoints_only_last_and_best_are_written(tmp_path):
    run = make_model().train(params(8, train_loader=loader(1), save_phase_checkpoints=False),
                             root=tmp_path / "runs", verbose=False)
    assert set(tags(tmp_path / "runs" / run.id)) == {"last", "best"}
    last = NNCheckpoint.load(run.id, Checkpoints.LAST, root=tmp_path / "runs")
    assert last.epoch == 7 and last.training_state_present
    assert last.training_state()["epoch"] == 7


# -- BEST: the first finite of val error -> val loss -> train error -> train loss ---------------


def test_best_falls_through_a_nan_validation_error_to_the_validation_loss(tmp_path):
    def evaluate(ctx):
        return NNEvaluationDataPoint(error=math.nan, loss=[0.9, 0.5, 0.7][ctx.epoch_idx])

    with pytest.warns(RuntimeWarning, match="val_edp.error"):
        run = make_model().train(params(3, val_loader=loader(1)), eval_step_fn=evaluate,
                                 train_step_fn=scripted_train(errors=[0.01, 0.02, 0.0]),
                                 root=tmp_path / "runs", verbose=False)
    best = run.best_checkpoint()
    assert best.epoch == 1 and best.score == pytest.approx(0.5)  # never the training error


def test_best_without_validation_uses_the_training_error_then_loss(tmp_path):
    run = make_model().train(params(3), train_step_fn=scripted_train(errors=[0.5, 0.3, 0.4]),
                             root=tmp_path / "errors", verbose=False)
    assert run.best_checkpoint().epoch == 1
    assert run.best_checkpoint().score == pytest.approx(0.3)
    run = make_model().train(params(3), train_step_fn=scripted_train(losses=[0.9, 0.8, 0.95]),
                             root=tmp_path / "losses", verbose=False)
    assert run.best_checkpoint().epoch == 1
    assert run.best_checkpoint().score == pytest.approx(0.8)


@pytest.mark.parametrize("unavailable", [
    NNEvaluationDataPoint(extra={"note": 1.0}),  # neither error nor loss
    NNEvaluationDataPoint(kind="categorical", count=0, status="empty"),  # every target masked
], ids=["no-error-no-loss", "empty"])
def test_an_unavailable_validation_record_ends_the_walk(tmp_path, unavailable):
    def evaluate(ctx):
        return unavailable if ctx.epoch_idx == 1 else NNEvaluationDataPoint(error=0.5)

    train = scripted_train(errors=[0.9, 0.0, 0.9])  # epoch 1's training error would win
    bests = []

    class Probe(Callback):
        def on_epoch_end(self, ctx):
            ctx.defer(lambda c: bests.append(NNCheckpoint.load(c.run.id, Checkpoints.BEST,
                                                               root=c.run.root).epoch))

    with pytest.warns(RuntimeWarning, match="no metric available"):  # the plateau step skips
        make_model().train(params(3, val_loader=loader(1), scheduler=NNTrainParams().scheduler),
                           eval_step_fn=evaluate, train_step_fn=train, callbacks=[Probe()],
                           root=tmp_path / "runs", verbose=False)
    assert bests == [0, 0, 0]


# -- runs/best -------------------------------------------------------------------------------


def _run(root: Path, salt: str, errors, **kw) -> NNRun:
    p = params(len(errors), val_loader=loader(1), **kw.pop("train", {}))
    return make_model().train(p, eval_step_fn=val_errors(errors), salt=salt, root=root,
                              verbose=False, **kw)


def test_runs_best_names_the_lower_scoring_run(tmp_path):
    root = tmp_path / "runs"
    a = _run(root, "a", [0.4, 0.5])
    assert pointer(root) == a.id
    b = _run(root, "b", [0.3, 0.2])
    assert a.id != b.id
    assert pointer(root) == b.id
    _run(root, "c", [0.6, 0.25])
    assert pointer(root) == b.id
    assert current_best(root) == b.id


def test_runs_best_ties_keep_the_incumbent_then_the_smallest_id(tmp_path):
    root = tmp_path / "runs"
    runs = [_run(root, salt, [0.3]) for salt in ("x", "y", "z")]
    first = runs[0].id
    assert first != min(r.id for r in runs)  # so the two tie rules are told apart
    assert pointer(root) == first  # every later tie keeps the incumbent
    assert elect_best(root) == first and pointer(root) == first
    (root / "best").unlink()
    assert elect_best(root) == min(r.id for r in runs)  # no incumbent: the smallest id
    assert pointer(root) == min(r.id for r in runs)


def test_overwriting_the_pointer_owner_re_elects_before_deleting(tmp_path):
    root = tmp_path / "runs"
    a = _run(root, "a", [0.2, 0.3])
    b = _run(root, "b", [0.4, 0.5])
    assert pointer(root) == a.id
    seen = []

    class Watch(Callback):
        def on_train_begin(self, ctx):
            assert not (ctx.run.path / "checkpoints" / "best.pt").exists()  # emptied
            seen.append(("begin", pointer(root)))

        def on_epoch_end(self, ctx):
            ctx.defer(lambda c: seen.append((c.epoch, pointer(root))))  # after the commit

    again = _run(root, "a", [0.6, 0.1], callbacks=[Watch()],
                 train={"overwrite_existing": True})
    assert again.id == a.id
    # The survivor took the slot before A's artifacts went; A's replacement claims it
    # back only once its own BEST (0.1) commits.
    assert seen == [("begin", b.id), (0, b.id), (1, a.id)]
    assert pointer(root) == a.id


def test_overwriting_the_only_candidate_leaves_no_pointer(tmp_path):
    root = tmp_path / "runs"
    a = _run(root, "a", [0.2])
    assert pointer(root) == a.id
    seen = []

    class Watch(Callback):
        def on_train_begin(self, ctx):
            seen.append(pointer(root))

    _run(root, "a", [0.5], callbacks=[Watch()], train={"overwrite_existing": True})
    assert seen == [None]
    assert pointer(root) == a.id  # its new BEST commits and it is elected again


def test_a_named_monitor_run_is_never_elected(tmp_path):
    root = tmp_path / "runs"
    monitored = _run(root, "m", [0.01, 0.02], train={"monitor": MonitorSpec(metric="error")})
    assert monitored.best_checkpoint().named_monitor
    assert pointer(root) is None  # the only run is not a candidate: no pointer
    plain = _run(root, "p", [0.9])
    assert pointer(root) == plain.id
    assert elect_best(root) == plain.id


def test_an_unavailable_first_epoch_is_replaced_by_the_next_finite_one(tmp_path):
    def evaluate(ctx):
        if ctx.epoch_idx == 0:
            return NNEvaluationDataPoint()  # no signal at all: an unavailable baseline
        return NNEvaluationDataPoint(error=[None, 0.4, 0.5][ctx.epoch_idx])

    bests = []

    class Probe(Callback):
        def on_epoch_end(self, ctx):
            ctx.defer(lambda c: bests.append(NNCheckpoint.load(c.run.id, Checkpoints.BEST,
                                                               root=c.run.root).score))

    make_model().train(params(3, val_loader=loader(1)), eval_step_fn=evaluate,
                       callbacks=[Probe()], root=tmp_path / "runs", verbose=False)
    assert bests == [math.inf, pytest.approx(0.4), pytest.approx(0.4)]


def test_election_skips_runs_that_are_not_committed_candidates(tmp_path):
    root = tmp_path / "runs"
    a = _run(root, "a", [0.3, 0.1])
    b = _run(root, "b", [0.4, 0.5])
    assert pointer(root) == a.id
    checkpoints = root / a.id / "checkpoints"
    # A's LAST now names epoch 0 while its BEST is epoch 1: BEST is past the commit.
    (checkpoints / "last.pt").write_bytes((checkpoints / "first.pt").read_bytes())
    assert elect_best(root) == b.id and pointer(root) == b.id
    # A bare reservation and a directory with a malformed run.yaml are never candidates.
    (root / ("0" * 32)).mkdir()
    junk = root / ("f" * 32)
    (junk / "checkpoints").mkdir(parents=True)
    (junk / "run.yaml").write_text("not: [a, run\n")
    for name in ("best.pt", "last.pt"):  # A's BEST scores 0.1: it would win if counted
        (junk / "checkpoints" / name).write_bytes((checkpoints / "best.pt").read_bytes())
    assert elect_best(root) == b.id


def test_a_failed_last_commit_rolls_the_history_back(tmp_path):
    root = tmp_path / "runs"

    class BreakLast(Callback):
        def on_epoch_end(self, ctx):
            if ctx.epoch == 0:
                ctx.defer(self.break_last)  # once epoch 0's LAST has committed

        def break_last(self, ctx):  # the next LAST write cannot replace a directory
            last = ctx.run.checkpoints_dir / "last.pt"
            last.unlink()
            last.mkdir()

    model = make_model()
    with pytest.raises(OSError):
        model.train(params(3), callbacks=[BreakLast()], root=root, verbose=False)
    run_dir = next(p for p in root.iterdir() if p.name != "best" and not p.name.startswith("."))
    rows = list(csv.DictReader(io.StringIO((run_dir / "idps.csv").read_text())))
    assert {r["epoch"] for r in rows} == {"0"}


def test_an_empty_last_is_rejected_rather_than_erasing_history(tmp_path):
    root = tmp_path / "runs"
    run = make_model().train(params(2), root=root, verbose=False)
    history = (root / run.id / "idps.csv").read_bytes()
    (root / run.id / "checkpoints" / "last.pt").write_bytes(b"")
    with pytest.raises(Exception):  # noqa: B017 - torch raises its own error type
        NNRun.load(run.id, root=root)
    assert (root / run.id / "idps.csv").read_bytes() == history


def test_a_failed_reservation_write_releases_the_run_for_a_retry(tmp_path, monkeypatch):
    import nnx._engine.fit_setup as fit_setup

    root = tmp_path / "runs"
    calls = []

    def failing(path, text, **kw):
        calls.append(path)
        raise OSError("disk full")

    monkeypatch.setattr(fit_setup, "atomic_write_text", failing)
    with pytest.raises(OSError, match="disk full"):
        make_model().train(params(1), root=root, verbose=False)
    assert calls and [p for p in root.iterdir() if not p.name.startswith(".")] == []
    monkeypatch.undo()
    run = make_model().train(params(1), root=root, verbose=False)  # the retry is admitted
    assert (root / run.id / "checkpoints" / "last.pt").is_file()


def test_the_incremental_promotion_agrees_with_a_full_election(tmp_path):
    """The loop promotes a run whose BEST improved by reading only the incumbent; after
    every run the pointer is what a full election over every run would choose."""
    root = tmp_path / "runs"
    for seed, epochs in ((0, 1), (1, 3), (2, 2), (3, 1)):
        salt = f"s{seed}-{epochs}"
        make_model(seed).train(params(epochs), salt=salt, root=root, verbose=False)
        chosen = current_best(root)
        assert chosen == elect_best(root)  # a full election keeps it: nothing moved
    # A vanished incumbent sends the promotion down the full path.
    shutil.rmtree(root / chosen)
    runs = [p.name for p in root.iterdir() if p.is_dir() and not p.is_symlink()
            and not p.name.startswith(".")]
    assert promote_best(root, runs[0], math.inf) == elect_best(root) == current_best(root)


def test_an_election_interleaved_with_an_overwrite_never_advertises_the_old_run(
        tmp_path, monkeypatch):
    """Lock-respecting interleaving of the library's own calls (§4.1): while run A is
    overwritten, another run D commits its first BEST (promote_best under .best.lock) in
    the window where the overwrite holds no lock, and A's old score is replayed through
    promote_best too. Neither may point runs/best at A's old artifacts, which are being
    deleted: the pointer never dangles nor names a run without a committed BEST."""
    from nnx._foundation.locking import file_lock

    root, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    a = _run(root, "a", [0.1])
    d = _run(elsewhere, "d", [0.5])  # committed elsewhere, lands in root mid-overwrite
    assert pointer(root) == a.id
    real_rmtree, seen = shutil.rmtree, []

    def interleaved_rmtree(path, *args, **kwargs):
        path = Path(path)
        if path.parent == root and not seen:  # the overwrite deleting A's old artifacts
            os.rename(elsewhere / d.id, root / d.id)
            with file_lock(root / ".best.lock"):
                seen.append(promote_best(root, d.id, 0.5))  # D's own BEST commit
            with file_lock(root / ".best.lock"):
                seen.append(promote_best(root, a.id, 0.1))  # A's old score cannot return
            real_rmtree(path, *args, **kwargs)
            seen.append(pointer(root))  # no dangling pointer, no emptied run
            return None
        return real_rmtree(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", interleaved_rmtree)
    _run(root, "a", [0.9], train={"overwrite_existing": True})
    monkeypatch.undo()
    assert seen == [d.id, d.id, d.id]
    assert pointer(root) == d.id  # A's replacement (0.9) does not beat D (0.5)
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == sorted(
        ["best", a.id, d.id])  # the renamed-aside artifacts are gone
