"""The loop's user-facing surface (spec §4, §6.4, §6.5): ``idp.selection`` is the epoch's
MonitorRecord everywhere it is read, ``callbacks=None`` / ``components=None`` mean none,
``verbose=False`` prints nothing, and a run the NaN guard skipped entirely fails."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import (
    Callback,
    Checkpoints,
    MetricSpec,
    MonitorRecord,
    MonitorSpec,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNIterationDataPoint,
    NNOptimParams,
    NNRun,
    NNTrainerParams,
    NNTrainParams,
    Trainer,
    supervised_objective,
)
from nnx.history import HistoryJournal, iter_history

NLLS = [0.8, 0.7, 0.695, 0.71]  # §6.4's worked series: improvements on epochs 0 and 1


def _scripted(ctx: Any) -> NNEvaluationDataPoint:
    return NNEvaluationDataPoint(loss=1.0, metrics={"nll": NLLS[ctx.epoch_idx]})


def _monitored(n_epochs: int = 4) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=tiny_batches(2),
                         val_loader=tiny_batches(1, seed=1), optim=sgd(), scheduler=None,
                         metrics=[MetricSpec("nll")],
                         monitor=MonitorSpec(metric="nll", min_delta=0.01))


def _is_the_epochs_record(selection: object, epoch: int) -> bool:
    assert isinstance(selection, MonitorRecord), type(selection)
    assert (selection.metric, selection.split, selection.direction) == ("nll", "val", "min")
    assert selection.min_delta == 0.01 and selection.status == "ok"
    assert selection.value == pytest.approx(NLLS[epoch])
    return selection.improved


# -- 1. selection is a MonitorRecord, live and read back -------------------------------
@pytest.mark.parametrize("history", ["csv", "journal"])
def test_selection_is_the_epochs_monitor_record_live_loaded_and_in_checkpoints(
        tmp_path: Path, history: str) -> None:
    root = tmp_path / "runs"
    live: list[bool] = []

    class Probe(Callback):
        def on_epoch_end(self, ctx: Any) -> None:
            live.append(_is_the_epochs_record(ctx.idp.selection, ctx.epoch))

    journal = HistoryJournal(retention=100) if history == "journal" else None
    run = tiny_model().train(_monitored(), eval_step_fn=_scripted, callbacks=[Probe()],
                             root=root, verbose=False, history=journal)
    assert live == [True, True, False, False]
    loaded = NNRun.load(run.id, root=root)
    assert [_is_the_epochs_record(r.selection, r.epoch)
            for r in loaded.epoch_records()] == live
    if history == "journal":
        records = [r for r in iter_history(run.id, root=root) if r.selection is not None]
        assert [_is_the_epochs_record(r.selection, r.epoch) for r in records] == live
    for tag in ("last", "best"):
        idp = NNCheckpoint.from_file(root / run.id / "checkpoints" / f"{tag}.pt").idp
        assert idp is not None
        _is_the_epochs_record(idp.selection, idp.epoch)
    assert NNCheckpoint.load(run.id, Checkpoints.BEST, root=root).epoch == 1


def test_selection_serializes_exactly_as_the_plain_mapping_did(tmp_path: Path) -> None:
    root = tmp_path / "runs"
    run = tiny_model().train(_monitored(2), eval_step_fn=_scripted, root=root, verbose=False)
    last = run.epoch_records()[-1]
    assert last.selection is not None
    state = {"metric": "nll", "split": "val", "direction": "min", "min_delta": 0.01,
             "status": "ok", "improved": True, "value": 0.7}
    assert last.state()["selection"] == state  # the checkpoint / journal form
    csv_text = (root / run.id / "idps.csv").read_text()
    assert json.dumps(state, sort_keys=True) in csv_text.replace('""', '"')  # the CSV cell
    # from_state (and the constructor) still take that mapping, and rebuild the record.
    rebuilt = NNIterationDataPoint.from_state(last.state())
    assert rebuilt.selection == MonitorRecord.from_state(state) == last.selection
    assert rebuilt.state() == last.state()
    # The record still answers the mapping's reads.
    assert last.selection["improved"] is True and last.selection.get("value") == 0.7


def test_a_malformed_selection_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"MonitorRecord state lacks field\(s\)"):
        NNIterationDataPoint(epoch=0, iter_idx=0, batch_idx=0, selection={"improved": True})
    with pytest.raises(ValueError, match="NNIterationDataPoint.selection must be a "
                                         "MonitorRecord"):
        NNIterationDataPoint(epoch=0, iter_idx=0, batch_idx=0, selection=True)  # type: ignore[arg-type]


# -- 2. callbacks=None / components=None ----------------------------------------------
def _trainer_params() -> NNTrainerParams:
    return (NNTrainerParams.builder().n_epochs(1).train_loader(tiny_batches(2))
            .optimizer("net", NNOptimParams.builder().sgd(max_lr=0.1).build()).build())


@pytest.mark.parametrize("loop", ["model", "trainer"])
def test_callbacks_none_and_components_none_mean_none(tmp_path: Path, loop: str) -> None:
    if loop == "model":
        run = tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2),
                                               optim=sgd()),
                                 callbacks=None, components=None, root=tmp_path,
                                 verbose=False)
    else:
        run = Trainer(tiny_model()).train(_trainer_params(), objective=supervised_objective(),
                                          callbacks=None, components=None, root=tmp_path,
                                          verbose=False)
    assert [r.epoch for r in run.epoch_records()] == [0]


# -- 4. verbose=False prints nothing ---------------------------------------------------
def _train(loop: str, root: Path, verbose: bool | None) -> NNRun:
    if loop == "model":
        return tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2),
                                                optim=sgd(), overwrite_existing=True),
                                  root=root, verbose=verbose)
    return Trainer(tiny_model()).train(_trainer_params(), objective=supervised_objective(),
                                       root=root, verbose=verbose)


@pytest.mark.parametrize("loop", ["model", "trainer"])
def test_verbose_false_prints_no_run_saved_line_and_none_or_true_do(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        loop: str) -> None:
    monkeypatch.chdir(tmp_path)
    run = _train(loop, tmp_path / "runs", verbose=False)
    assert capsys.readouterr().out == ""
    for i, verbose in enumerate((None, True)):
        if loop == "trainer":  # the Trainer has no overwrite: a fresh root each time
            run = _train(loop, tmp_path / f"runs{i}", verbose=verbose)
            where = f"runs{i}/{run.id}"
        else:
            run = _train(loop, tmp_path / "runs", verbose=verbose)
            where = f"runs/{run.id}"
        assert capsys.readouterr().out.splitlines() == [f"Run saved to {where}"]
