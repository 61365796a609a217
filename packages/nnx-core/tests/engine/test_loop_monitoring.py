"""Monitored values in the loop (spec §6.2, §6.4): a declared max metric read the same way
by EarlyStopping, and a NaN validation error falling through with one warning per epoch."""

from __future__ import annotations

import math

import pytest
from _nnx_core_tiny import sgd
from _support.training_loop import _loader, _scripted_eval, make_model

from nnx import (
    Callback,
    EarlyStopping,
    MetricSpec,
    MonitorSpec,
    NNEvaluationDataPoint,
    NNTrainParams,
)


def test_a_declared_max_metric_monitor_is_read_the_same_way_by_early_stopping(tmp_path):
    accuracies = [0.5, 0.6, 0.55]  # a declared accuracy's natural direction is "max"
    params = NNTrainParams(n_epochs=3, train_loader=_loader(), val_loader=_loader(),
                           optim=sgd(), metrics=[MetricSpec("accuracy", name="acc")],
                           monitor=MonitorSpec(metric="acc"), scheduler=None)
    stopper = EarlyStopping(monitor=MonitorSpec(metric="acc"), patience=5)
    waits: list[int] = []

    class Probe(Callback):
        def on_epoch_end(self, ctx):
            waits.append(stopper.wait)

    run = make_model().train(params, eval_step_fn=_scripted_eval(accuracies, "acc"),
                             callbacks=[stopper, Probe()], root=tmp_path / "runs", verbose=False)
    assert [r.selection["improved"] for r in run.epoch_records()] == [True, True, False]
    assert [r.selection["direction"] for r in run.epoch_records()] == ["max"] * 3
    assert waits == [0, 0, 1]
    assert run.best_checkpoint().epoch == 1


# -- the control-signal walk rejects non-finite values loudly ------------------------------


def test_a_nan_validation_error_falls_through_with_one_warning_per_epoch(tmp_path):
    def evaluate(ctx):
        return NNEvaluationDataPoint(error=math.nan, loss=[0.9, 0.5, 0.7][ctx.epoch_idx])

    with pytest.warns(RuntimeWarning) as caught:
        run = make_model().train(
            NNTrainParams(n_epochs=3, train_loader=_loader(), val_loader=_loader(), optim=sgd(),
                          scheduler=None),
            eval_step_fn=evaluate, root=tmp_path / "runs", verbose=False)
    rejected = [w for w in caught if "val_edp.error" in str(w.message)]
    assert len(rejected) == 3
    assert all("val_edp.loss" in str(w.message) for w in rejected)
    best = run.best_checkpoint()
    assert best is not None and best.epoch == 1 and best.score == pytest.approx(0.5)
