"""``nnx runs list`` rows (created, epochs, status, BEST and what it scores, salt / data id),
the status rule, id prefixes in ``runs show`` / ``runs verify``, and what ``runs show`` says
BEST scores (spec §4, §4.1, §4.4; docs/durability.md)."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import Callback, EarlyStopping, Losses, MonitorSpec, NNCheckpoint, NNTrainParams
from nnx.cli import main
from nnx.provenance import ExperimentManifest


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    return tmp_path


def params(n_epochs=3, *, val=True, **changes):
    return NNTrainParams(n_epochs=n_epochs, train_loader=tiny_batches(),
                         val_loader=tiny_batches(seed=1) if val else None, scheduler=None,
                         optim=sgd(), **changes)


def train(p=None, **kwargs):
    return tiny_model().train(params() if p is None else p, verbose=False, **kwargs)


def listing(capsys) -> dict[str, str]:
    capsys.readouterr()  # drop what training printed
    assert main(["runs", "list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:5] == ["run", "id", "net", "epochs", "status"]
    return {line.split()[0]: line for line in out[1:]}


class Raise(Callback):
    """Fails the fit at the end of ``epoch``, before that epoch commits (the callbacks run
    before the commit), so LAST is the epoch before it."""

    def __init__(self, epoch, error=None):
        self.epoch, self.error = epoch, error or RuntimeError("boom")

    def on_epoch_end(self, ctx):
        if ctx.epoch == self.epoch:
            raise self.error


def test_a_row_shows_created_epochs_status_best_and_what_it_scores_salt_and_data(capsys,
                                                                                 in_tmp):
    run = train(params(data_id="tiny-v1"), salt="replicate-2")
    best = run.best_checkpoint()
    row = listing(capsys)[run.id]
    marker = in_tmp / "runs" / run.id / ".history-committed-by-last"
    created = datetime.fromtimestamp(marker.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    assert re.fullmatch(
        rf"{run.id}\s+FEED_FWD\s+3\s+committed\s+val error {best.score:.3f} @ epoch "
        rf"{best.epoch}\s+{created}\s+salt=replicate-2 data=tiny-v1\s+\*", row), row


def test_best_names_the_first_finite_signal_and_a_named_monitor(capsys):
    no_val = train(params(val=False))  # no validation: the training error scores
    # A regression loss records no error at all: the training loss scores.
    regression = tiny_model(loss=Losses.MEAN_SQUARED_ERROR, out=1).train(
        NNTrainParams(n_epochs=2, scheduler=None, optim=sgd(),
                      train_loader=[(x, x[:, :1]) for x, _ in tiny_batches()]), verbose=False)
    monitored = train(params(monitor=MonitorSpec(metric="loss", split="val")))
    rows = listing(capsys)
    checks = {no_val.id: "train error", regression.id: "train loss",
              monitored.id: "val loss"}
    for run_id, what in checks.items():
        best = NNCheckpoint.load(run_id, "best")
        value = f"{best.score:.3f}" if what.endswith("error") else f"{best.score:.4g}"
        assert f"  {what} {value} @ epoch {best.epoch}  " in rows[run_id], rows[run_id]


def test_status_is_interrupted_when_the_last_attempt_failed_or_last_ends_early(capsys):
    plan = ExperimentManifest(config={"case": "failed"})
    with pytest.raises(RuntimeError, match="boom"):
        train(salt="failed", provenance=plan, callbacks=[Raise(1)])
    with pytest.raises(KeyboardInterrupt):  # no provenance: LAST is epoch 0 of 3
        train(salt="killed", callbacks=[Raise(1, KeyboardInterrupt())])
    early = EarlyStopping(patience=0)  # stops after epoch 1 of 3
    stopped = train(salt="early", provenance=ExperimentManifest(config={"case": "early"}),
                    callbacks=[early])
    bare_early = train(salt="early-bare", callbacks=[EarlyStopping(patience=0)])
    rows = listing(capsys)
    by_salt = {re.search(r"salt=(\S+)", line).group(1): line for line in rows.values()}
    assert re.search(r"FEED_FWD\s+1\s+interrupted\s", by_salt["failed"])
    assert re.search(r"FEED_FWD\s+1\s+interrupted\s", by_salt["killed"])
    # An early stop completes its attempt: committed, with fewer epochs than planned.
    assert stopped.provenance.attempt.status == "completed"
    assert early.stopped_epoch is not None and early.stopped_epoch < 2
    assert re.search(rf"FEED_FWD\s+{early.stopped_epoch + 1}\s+committed\s",
                     by_salt["early"])
    # Without provenance LAST's manifest records the deliberate stop: committed, while a
    # kill (or failure) after an earlier epoch's commit reads interrupted.
    assert NNCheckpoint.resume_point(bare_early.id, "last").position["stopped"] is True
    assert " committed " in by_salt["early-bare"] and bare_early.id in rows
    killed = next(run_id for run_id, line in rows.items() if "salt=killed" in line)
    assert "stopped" not in NNCheckpoint.resume_point(killed, "last").position


def test_status_is_running_while_a_process_holds_the_lease_and_the_probe_creates_nothing(
        capsys, in_tmp):
    seen = {}

    class ListDuringTraining(Callback):
        def on_epoch_end(self, ctx):
            if ctx.epoch == 1:  # after epoch 1 commits: LAST is epoch 1, so 2 done
                ctx.defer(lambda _: seen.__setitem__("rows", listing(capsys)))

    run = train(callbacks=[ListDuringTraining()])
    assert re.search(r"FEED_FWD\s+2\s+running\s", seen["rows"][run.id])
    assert re.search(r"FEED_FWD\s+3\s+committed\s", listing(capsys)[run.id])
    # The lease file of a run that never trained in this root is not created by a probe.
    root = in_tmp / "runs"
    (root / ".leases" / f"{run.id}.lock").unlink()
    before = sorted(p.relative_to(root) for p in root.rglob("*"))
    listing(capsys)
    assert sorted(p.relative_to(root) for p in root.rglob("*")) == before


def test_show_and_verify_accept_a_unique_id_prefix(capsys):
    run = train()
    capsys.readouterr()
    assert main(["runs", "show", run.id[:6]]) == 0
    assert f"run: {run.id}" in capsys.readouterr().out
    assert main(["runs", "verify", run.id[:6]]) == 0
    assert "ok  last  generation" in capsys.readouterr().out


def test_an_ambiguous_prefix_lists_the_candidates_and_no_match_is_no_run(capsys, in_tmp):
    ids = sorted(train(salt=f"s{i}").id for i in range(20))
    prefix = next(ids[i][:1] for i in range(len(ids) - 1) if ids[i][0] == ids[i + 1][0])
    matching = [i for i in ids if i.startswith(prefix)]
    before = sorted((in_tmp / "runs").rglob("*"))
    capsys.readouterr()
    for command in ("show", "verify"):
        assert main(["runs", command, prefix]) == 1
        captured = capsys.readouterr()
        assert captured.out == ""
        assert (f"run id prefix {prefix!r} is ambiguous under runs: {len(matching)} runs "
                f"match ({', '.join(matching)}); give more of the id") in captured.err
    hexes = "0123456789abcdef"
    unused = next(a + b for a in hexes for b in hexes if not any(i.startswith(a + b)
                                                                 for i in ids))
    assert main(["runs", "show", unused]) == 1
    assert "no run" in capsys.readouterr().err
    assert main(["runs", "verify", unused]) == 1
    assert f"no run {unused!r} under runs" in capsys.readouterr().err
    assert sorted((in_tmp / "runs").rglob("*")) == before  # nothing written


def test_show_says_what_the_best_score_is(capsys):
    run = train()
    best = run.best_checkpoint()
    assert f"best: epoch {best.epoch} (val error {best.score:.3f})" in str(run)
    capsys.readouterr()
    assert main(["runs", "show", run.id]) == 0
    assert f"best: epoch {best.epoch} (val error {best.score:.3f})" in capsys.readouterr().out
