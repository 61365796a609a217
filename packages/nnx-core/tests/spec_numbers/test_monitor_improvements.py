"""The spec's worked monitor series (§6.4 Named metrics and monitors): validation NLL
[0.8, 0.7, 0.695, 0.71] with min_delta=0.01 improves on epochs 0 and 1 only, for the
tracker and, in a run, for BEST, ReduceLROnPlateau and EarlyStopping alike."""

from __future__ import annotations

import pytest
from _nnx_core_tiny import sgd
from _support.training_loop import _loader, _scripted_eval, make_model

from nnx import (
    Callback,
    Checkpoints,
    EarlyStopping,
    MetricSpec,
    MonitorSpec,
    NNCheckpoint,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
)
from nnx.monitors import MonitorTracker


def test_the_spec_example_improves_on_epochs_zero_and_one_only() -> None:
    spec = MonitorSpec(metric="nll", split="val", min_delta=0.01)
    tracker = MonitorTracker(spec, spec.direction({"nll": "min"}))
    records = [tracker.decide(v) for v in [0.8, 0.7, 0.695, 0.71]]
    assert [r.improved for r in records] == [True, True, False, False]
    assert tracker.best == 0.7
    assert all(r.status == "ok" for r in records)


def test_validation_nll_with_min_delta_improves_on_epochs_0_and_1_for_all_three(tmp_path):
    nlls = [0.8, 0.7, 0.695, 0.71]
    monitor = MonitorSpec(metric="nll", min_delta=0.01)
    params = NNTrainParams(
        n_epochs=4, train_loader=_loader(), val_loader=_loader(), optim=sgd(0.1),
        metrics=[MetricSpec("nll")], monitor=monitor,
        scheduler=NNSchedulerParams(patience=1, factor=0.5))
    stopper = EarlyStopping(monitor=monitor, patience=5)
    seen: list[dict[str, object]] = []

    class Probe(Callback):
        def on_epoch_end(self, ctx):
            ctx.defer(self.committed)  # BEST is written by the commit after on_epoch_end

        def committed(self, ctx):
            best = NNCheckpoint.load(ctx.run.id, Checkpoints.BEST, root=ctx.run.root)
            plateau = ctx.scheduler
            seen.append({"best_epoch": best.epoch, "bad": plateau.num_bad_epochs,
                         "plateau_best": plateau.best,
                         "lr": ctx.optimizer.param_groups[0]["lr"], "wait": stopper.wait,
                         "improved": ctx.idp.selection["improved"],
                         "status": ctx.idp.selection["status"]})

    run = make_model().train(params, eval_step_fn=_scripted_eval(nlls, "nll"),
                             callbacks=[stopper, Probe()], root=tmp_path / "runs", verbose=False)

    assert [s["improved"] for s in seen] == [True, True, False, False]
    assert [s["status"] for s in seen] == ["ok"] * 4
    assert [s["best_epoch"] for s in seen] == [0, 1, 1, 1]  # BEST written on 0 and 1 only
    # ReduceLROnPlateau(patience=1): 0.695 is no improvement (needs < 0.69), 0.71 the
    # second bad epoch, which cuts the rate and resets the counter.
    assert [s["bad"] for s in seen] == [0, 0, 1, 0]
    assert [s["plateau_best"] for s in seen] == pytest.approx([0.8, 0.7, 0.7, 0.7])
    assert [s["lr"] for s in seen] == pytest.approx([0.1, 0.1, 0.1, 0.05])
    assert [s["wait"] for s in seen] == [0, 0, 1, 2]
    best = run.best_checkpoint()
    assert best is not None and best.epoch == 1 and best.monitor_value == pytest.approx(0.7)
    loaded = NNRun.load(run.id, root=tmp_path / "runs")
    assert [r.selection["improved"] for r in loaded.epoch_records()] == [True, True, False, False]
    assert [r.val_edp.metrics["nll"] for r in loaded.epoch_records()] == nlls
