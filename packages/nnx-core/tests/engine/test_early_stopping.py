"""EarlyStopping (spec §5, §6.1): the default monitor and its fallbacks, refusals, a missing
field, NaN, patience and training fields."""

from __future__ import annotations

import math
import warnings

import pytest
import torch
from _support.callbacks import last_epoch, make_model, params

from nnx import (
    EarlyStopping,
    NNEvaluationDataPoint,
    NNModel,
    NNParams,
    NNTrainParams,
)


def scripted(**fields):
    """An eval_step_fn reporting, per epoch, the i-th value of each given field list."""
    def evaluate(ctx):
        return NNEvaluationDataPoint(**{k: v[ctx.epoch_idx] for k, v in fields.items()})
    return evaluate


# -- EarlyStopping ------------------------------------------------------------------------------


def test_early_stopping_default_picks_the_validation_error_and_keeps_it(tmp_path):
    stopper = EarlyStopping(patience=2)
    with pytest.warns(RuntimeWarning, match="val_edp.error") as caught:
        run = make_model().train(
            params(5), eval_step_fn=scripted(error=[0.5, None, 0.6, 0.7, 0.1],
                                             loss=[0.9, 0.1, 0.05, 0.01, 0.01]),
            callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.selected_monitor == "val_edp.error"
    # Epoch 1 has no error: it does not count; epochs 2 and 3 do, and the run stops.
    assert len([w for w in caught if "EarlyStopping" in str(w.message)]) == 1
    assert stopper.stopped_epoch == 3 and last_epoch(run) == 3
    assert stopper.best == 0.5


def test_early_stopping_default_falls_back_to_the_validation_loss(tmp_path):
    stopper = EarlyStopping(patience=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the rejected-NaN notice
        run = make_model().train(
            params(4), eval_step_fn=scripted(error=[math.nan, 0.1, 0.1, 0.1],
                                             loss=[0.4, 0.3, 0.35, 0.2]),
            callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.selected_monitor == "val_edp.loss"
    assert stopper.stopped_epoch == 2 and last_epoch(run) == 2


def test_early_stopping_refuses_max_without_a_monitor_and_unknown_keys():
    with pytest.raises(ValueError, match="explicit monitor"):
        EarlyStopping(mode="max")
    with pytest.raises(ValueError, match="MonitorSpec"):
        EarlyStopping(monitor="val_edp.accuracy")
    with pytest.raises(ValueError):
        EarlyStopping(patience=-1)
    with pytest.raises(ValueError):
        EarlyStopping(min_delta=math.nan)
    assert EarlyStopping(monitor="val_edp.loss", mode="max").mode == "max"  # explicit: fine


def test_a_missing_monitored_field_warns_once_and_never_counts(tmp_path):
    stopper = EarlyStopping(monitor="val_edp.loss", patience=0)
    with pytest.warns(RuntimeWarning, match="val_edp.loss") as caught:
        run = make_model().train(params(3, val=False), callbacks=[stopper],
                                 root=tmp_path / "runs", verbose=False)
    assert len([w for w in caught if "EarlyStopping" in str(w.message)]) == 1
    assert stopper.stopped_epoch is None and stopper.wait == 0
    assert last_epoch(run) == 2  # patience=0 would have stopped on any counted epoch


def test_the_missing_monitor_warning_shows_once_per_run_not_once_per_process(tmp_path):
    # Python's "default" filter shows one text once per call site; each run's notice must
    # still appear, so it names its run.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        runs = [make_model().train(params(2, val=False), callbacks=[EarlyStopping()],
                                   root=tmp_path / "runs", salt=salt, verbose=False)
                for salt in ("first", "second")]
    notices = [str(w.message) for w in caught if "EarlyStopping" in str(w.message)]
    assert len(notices) == 2
    assert [run.id in notice for run, notice in zip(runs, notices, strict=True)] == [True, True]


def test_nan_counts_as_no_improvement_and_patience_zero_reacts_at_once(tmp_path):
    stopper = EarlyStopping(monitor="val_edp.loss", patience=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run = make_model().train(params(4), eval_step_fn=scripted(loss=[0.5, math.nan, 0.1, 0.1]),
                                 callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.stopped_epoch == 1 and last_epoch(run) == 1
    assert stopper.best == 0.5  # NaN never becomes the best


@pytest.mark.parametrize("fields", [{"loss": [math.nan] * 5},
                                    {"error": [math.nan] * 5, "loss": [math.inf] * 5}],
                         ids=["nan-loss", "nan-error-and-inf-loss"])
def test_the_default_monitor_stops_a_run_diverged_from_its_first_epoch(tmp_path, fields):
    stopper = EarlyStopping(patience=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = make_model().train(params(5), eval_step_fn=scripted(**fields), callbacks=[stopper],
                                 root=tmp_path / "runs", verbose=False)
    # Every value is present but not finite: each epoch counts, so patience 2 ends epoch 1.
    assert stopper.stopped_epoch == 1 and last_epoch(run) == 1
    assert stopper.best is None and stopper.selected_monitor is None
    assert not [w for w in caught if "EarlyStopping" in str(w.message)]  # nothing is missing


def test_the_default_monitor_selects_the_first_finite_field_after_nan_epochs(tmp_path):
    stopper = EarlyStopping(patience=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the rejected-NaN notices
        make_model().train(params(4), eval_step_fn=scripted(loss=[math.nan, 0.5, 0.4, 0.3]),
                           callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.selected_monitor == "val_edp.loss" and stopper.best == 0.3
    assert stopper.stopped_epoch is None and stopper.wait == 0


@pytest.mark.parametrize(("patience", "stopped"), [(0, 1), (1, 1), (2, 2), (3, None)])
def test_patience_counts_consecutive_non_improving_epochs(tmp_path, patience, stopped):
    stopper = EarlyStopping(monitor="val_edp.loss", patience=patience, min_delta=0.05)
    # 0.48 is within min_delta of 0.5: not an improvement.
    run = make_model().train(params(4), eval_step_fn=scripted(loss=[0.5, 0.48, 0.6, 0.3]),
                             callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.stopped_epoch == stopped
    assert last_epoch(run) == (3 if stopped is None else stopped)


def test_early_stopping_on_a_training_field(tmp_path):
    stopper = EarlyStopping(monitor="train_edp.loss", mode="max", patience=0)
    run = make_model().train(params(3, val=False), callbacks=[stopper], root=tmp_path / "runs",
                             verbose=False)
    # Training loss falls, so "max" sees no improvement after epoch 0.
    assert stopper.stopped_epoch == 1 and last_epoch(run) == 1


def test_early_stopping_on_an_undeclared_metric_is_refused_before_any_run(tmp_path):

    from nnx import EarlyStopping, MonitorSpec

    model = NNModel(net_params=NNParams(input_dim=2, output_dim=2))
    batches = [(torch.randn(4, 2), torch.randint(0, 2, (4,)))]
    stop = EarlyStopping(monitor=MonitorSpec(metric="brier"))
    with pytest.raises(ValueError, match="brier"):
        model.train(NNTrainParams(n_epochs=1, train_loader=batches, val_loader=batches),
                    callbacks=[stop], verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_a_validation_monitor_without_validation_data_is_refused_before_any_run(tmp_path):
    """§6.4: "A monitor on the validation split needs a val_loader ... checked before
    training" — EarlyStopping's MonitorSpec included, not only the run's own monitor."""
    from nnx import MonitorSpec

    model = make_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    stop = EarlyStopping(monitor=MonitorSpec(split="val"))
    with pytest.raises(ValueError, match=r"EarlyStopping.*validation split.*val_loader is None"):
        model.train(params(2, val=False), callbacks=[stop], verbose=False,
                    root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())
    # A training-split monitor needs no validation data.
    model.train(params(1, val=False), callbacks=[EarlyStopping(monitor=MonitorSpec(
        split="train"))], verbose=False, root=tmp_path / "runs")
