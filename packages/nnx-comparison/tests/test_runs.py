"""observations_from_runs (spec §23): from run ids alone, never unpickling."""

from __future__ import annotations

import pickle
import shutil

import numpy as np
import pytest
import torch
from _runs import train

from nnx import NNRun
from nnx.comparison import (
    Bootstrap,
    ComparisonError,
    ComparisonReport,
    Metric,
    compare,
    observations_from_runs,
    summarize,
)
from nnx.history import HistoryJournal


def _refuse(*args, **kwargs):
    raise AssertionError("a comparison unpickled something")


@pytest.fixture
def no_unpickling(monkeypatch):
    """pickle and torch.load raise while the comparison reads runs."""
    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, _refuse)
    monkeypatch.setattr(torch, "load", _refuse)


@pytest.fixture(scope="module")
def five_seeds(tmp_path_factory):
    root = tmp_path_factory.mktemp("seeds") / "runs"
    narrow = [train(root, seed=s, width=4).id for s in range(5)]
    wide = [train(root, seed=s, width=16).id for s in range(5)]
    return root, narrow, wide


def test_five_seeds_of_two_configurations_compare_end_to_end_from_run_ids(
        five_seeds, no_unpickling, tmp_path):
    root, narrow, wide = five_seeds
    observations = observations_from_runs(narrow + wide, metric="loss", root=root)
    summary = summarize(observations)
    assert summary.differing == ("config",) and [g.n for g in summary] == [5, 5]
    a, b = summary.groups
    assert [o.run_id for o in a.observations] == narrow
    assert {o.status for o in observations} == {"completed"}
    assert [o.replicate for o in a.observations] == [f"seed={s}" for s in range(5)]
    result = compare(a, b, pairing="seed: same data order", bootstrap=Bootstrap(seed=0))
    assert result.n == 5 and not result.unmatched
    assert [p.delta for p in result.pairs] == [
        y.value - x.value for x, y in zip(a.observations, b.observations, strict=True)]
    report = ComparisonReport.build(observations, [result])
    report.save(tmp_path / "report.json")
    assert ComparisonReport.load(tmp_path / "report.json").table() == report.table()


def test_values_are_the_last_committed_validation_records(five_seeds, no_unpickling):
    root, narrow, _ = five_seeds
    [first] = observations_from_runs(narrow[:1], metric="loss", root=root)
    assert first.evaluation == "epoch=1" and first.selection == "last"
    assert first.data is not None and first.split_id is not None
    assert first.attempt_id is not None and len(first.attempt_id) == 32


def test_the_value_matches_the_runs_own_history(five_seeds):
    root, narrow, _ = five_seeds
    run = NNRun.load(narrow[0], root=root)
    last = run.epoch_records()[-1]
    [observed] = observations_from_runs(narrow[:1], metric="loss", root=root)
    assert observed.value == last.val_edp.loss
    [train_side] = observations_from_runs(narrow[:1], metric="loss", split="train", root=root)
    assert train_side.value == last.train_summary.loss  # the epoch summary, not a batch
    [best] = observations_from_runs(narrow[:1], metric="loss", selection="best", root=root)
    elected = [r for r in run.epoch_records() if r.selection.improved][-1]
    assert best.value == elected.val_edp.loss and best.selection == "best:val.loss:min"


def test_configuration_identity_ignores_salt_seeds_and_device(tmp_path, monkeypatch):
    from nnx import Devices

    root = tmp_path / "runs"
    ids = [train(root, seed=1).id, train(root, seed=2, device=Devices.AUTO).id,
           train(root, seed=1, salt="again").id, train(root, seed=1, width=5).id]
    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, _refuse)
    monkeypatch.setattr(torch, "load", _refuse)
    observations = observations_from_runs(ids, metric="loss", root=root)
    assert len({o.config for o in observations[:3]}) == 1
    assert observations[3].config != observations[0].config
    assert [o.replicate for o in observations] == ["seed=1", "seed=2", "seed=1", "seed=1"]


def test_a_journal_run_reads_its_committed_epoch_rows(tmp_path, monkeypatch):
    root = tmp_path / "runs"
    run = train(root, seed=3, history=HistoryJournal(retention=4))
    expected = NNRun.load(run.id, root=root).epoch_records()[-1].val_edp.loss
    assert not (root / run.id / "idps.csv").exists()
    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, _refuse)
    monkeypatch.setattr(torch, "load", _refuse)
    [observed] = observations_from_runs([run.id], metric="loss", root=root)
    assert observed.value == expected and observed.evaluation == "epoch=1"


def test_without_provenance_a_committed_history_is_unknown_and_never_counted(tmp_path):
    root = tmp_path / "runs"
    run = train(root, seed=4, provenance=False)
    [observed] = observations_from_runs([run.id], metric="loss", root=root)
    assert observed.status == "unknown" and observed.value is None
    assert observed.attempt_id is None and observed.data is None
    (root / run.id / ".history-committed-by-last").unlink()  # a legacy run: no marker
    [legacy] = observations_from_runs([run.id], metric="loss", root=root)
    assert legacy.value is not None and legacy.status == "unknown"
    assert summarize([legacy]).pooled().n == 0


def test_arguments_are_checked_before_any_file_is_read(tmp_path):
    with pytest.raises(ValueError, match="run id"):
        observations_from_runs(["../x"], metric="loss", root=tmp_path)
    with pytest.raises(TypeError, match="Metric"):
        observations_from_runs(["a"], metric="nll", root=tmp_path)
    with pytest.raises(ValueError, match="selection"):
        observations_from_runs(["a"], metric="loss", selection="first", root=tmp_path)
    with pytest.raises(ComparisonError, match="twice"):
        observations_from_runs(["a", "a"], metric="loss", root=tmp_path)
    with pytest.raises(ComparisonError, match="label for every run"):
        observations_from_runs(["a", "b"], metric="loss", root=tmp_path, config={"a": "x"})
    with pytest.raises(ComparisonError, match="no run"):
        observations_from_runs(["a"], metric=Metric("loss", "min"), root=tmp_path)
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "run.yaml").write_text("[not, a, run]")
    with pytest.raises(ComparisonError, match=r"run\.yaml cannot be read"):
        observations_from_runs(["a"], metric="loss", root=tmp_path)


def test_config_labels_replace_the_identity(five_seeds):
    root, narrow, wide = five_seeds
    labels = dict.fromkeys(narrow + wide, "any")
    observations = observations_from_runs(narrow + wide, metric="accuracy", root=root,
                                          config=labels)
    assert len(summarize(observations)) == 1
    assert observations[0].metric == Metric("accuracy", "max")


def test_a_failed_attempt_is_listed_with_its_committed_value(tmp_path):
    from nnx import Callback

    class Boom(Callback):
        def on_epoch_end(self, ctx):
            if ctx.epoch == 1:
                raise RuntimeError("boom")

    root = tmp_path / "runs"
    ok = train(root, seed=0)
    with pytest.raises(RuntimeError, match="boom"):
        train(root, seed=1, callbacks=[Boom()])
    failed_id = next(p.name for p in root.iterdir() if len(p.name) == 32 and p.name != ok.id)
    observations = observations_from_runs([ok.id, failed_id], metric="loss", root=root)
    group = summarize(observations).pooled()
    assert group.n == 1 and group.n_failed == 1 and group.failed[0].run_id == failed_id
    assert np.isfinite(group.mean)
    shutil.rmtree(root)


@pytest.mark.parametrize("journal", [False, True])
def test_the_history_is_cut_at_the_epoch_the_attempt_committed(tmp_path, journal):
    import json

    root = tmp_path / "runs"
    extra = {"history": HistoryJournal(retention=4)} if journal else {}
    run = train(root, seed=6, **extra)
    records = NNRun.load(run.id, root=root).epoch_records()
    path = root / run.id / "attempt.json"
    attempt = json.loads(path.read_text())
    attempt.update(last_epoch=0, status="running")  # epoch 1 is an uncommitted tail
    path.write_text(json.dumps(attempt))
    [observed] = observations_from_runs([run.id], metric="loss", root=root)
    assert observed.evaluation == "epoch=0" and observed.value == records[0].val_edp.loss
    assert observed.status == "running"
    attempt["last_epoch"] = None  # nothing committed yet: no history is read
    path.write_text(json.dumps(attempt))
    [nothing] = observations_from_runs([run.id], metric="loss", root=root)
    assert nothing.value is None and nothing.evaluation is None
