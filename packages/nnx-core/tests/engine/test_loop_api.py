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
    with pytest.raises(ValueError, match=r"NNIterationDataPoint\.selection must be a "
                                         r"MonitorRecord"):
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


# -- 3. an epoch the NaN guard left without any update fails -------------------------
class EpochLoader:
    """Four (X, y) batches; from epoch ``poison_from`` on, the batches in ``poisoned``
    carry NaN inputs (so their loss is NaN). Told each epoch through set_epoch."""

    def __init__(self, poisoned: set[int], poison_from: int = 0) -> None:
        self.batches, self.poisoned, self.poison_from = tiny_batches(4), poisoned, poison_from
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):  # type: ignore[no-untyped-def]
        for i, (x, y) in enumerate(self.batches):
            bad = self.epoch >= self.poison_from and i in self.poisoned
            yield (torch.full_like(x, float("nan")) if bad else x), y


def _skip_warnings(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if "update window is skipped" in str(w.message)]


def _run_dirs(root: Path) -> list[str]:
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) if (
        root.exists()) else []


@pytest.mark.parametrize("owner", ["default", "objective", "trainer"])
def test_a_first_epoch_the_nan_guard_skipped_entirely_fails_and_leaves_no_run(
        tmp_path: Path, owner: str) -> None:
    from nnx import NonFiniteRunError, Objective

    class Skipping(Objective):
        nonfinite = "skip"

        def __init__(self) -> None:
            self.inner = supervised_objective()

        def __call__(self, ctx: Any) -> Any:
            return self.inner(ctx)

    root = tmp_path / "runs"
    model = tiny_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    loader = EpochLoader(poisoned={0, 1, 2, 3})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(NonFiniteRunError, match=(
                r"^epoch 0 committed no optimizer update: the NaN guard skipped 4 of 4 update "
                r"window\(s\) for a non-finite (training loss|loss term 'supervised') \(first "
                r"at batch 0\)")):
            if owner == "trainer":
                params = (NNTrainerParams.builder().n_epochs(3).train_loader(loader)
                          .optimizer("net", NNOptimParams.builder().sgd(max_lr=0.1).build())
                          .build())
                Trainer(model).train(params, objective=Skipping(), root=root, verbose=False)
            else:
                model.train(NNTrainParams(n_epochs=3, train_loader=loader, optim=sgd()),
                            objective=Skipping() if owner == "objective" else None,
                            root=root, verbose=False)
    assert _skip_warnings(caught) == []  # the error says it all: no per-batch warnings
    assert _run_dirs(root) == []  # no run, no BEST, no runs/best
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())
    assert issubclass(NonFiniteRunError, FloatingPointError)


def test_a_later_epoch_left_without_updates_fails_keeping_the_committed_epochs(
        tmp_path: Path) -> None:
    from nnx import NonFiniteRunError

    root = tmp_path / "runs"
    loader = EpochLoader(poisoned={0, 1, 2, 3}, poison_from=1)
    params = NNTrainParams(n_epochs=3, train_loader=loader, val_loader=tiny_batches(1),
                           optim=sgd())
    with pytest.raises(NonFiniteRunError, match=r"^epoch 1 committed no optimizer update"):
        tiny_model().train(params, root=root, verbose=False)
    (run_id,) = [r.id for r in NNRun.all(root=root)]
    assert _run_dirs(root) == sorted([run_id, "best"])  # the run keeps its epoch 0
    assert NNCheckpoint.load(run_id, root=root).epoch == 0  # LAST: the epoch that trained
    assert NNCheckpoint.load(run_id, Checkpoints.BEST, root=root).epoch == 0
    assert [r.epoch for r in NNRun.load(run_id, root=root).epoch_records()] == [0]


def test_windows_the_guard_skips_are_reported_once_per_epoch_with_their_count(
        tmp_path: Path) -> None:
    params = NNTrainParams(n_epochs=2, train_loader=EpochLoader(poisoned={1, 3}),
                           optim=sgd())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = tiny_model().train(params, root=tmp_path, verbose=False)
    assert _skip_warnings(caught) == [
        f"epoch {e}: non-finite training loss at batch 1: the update window is skipped "
        "(2 of 4 update window(s) this epoch)" for e in (0, 1)]
    assert [r.update_count for r in run.epoch_records()] == [2, 4]  # the finite windows
