"""Named monitors (spec §6.4): the one improvement rule, policies, records and resume."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from nnx.metrics import MetricSpec, metric_modes
from nnx.monitors import (
    MonitorRecord,
    MonitorSpec,
    MonitorTracker,
    MonitorUnavailableError,
    check_monitor,
    improved,
)

NAN, INF = float("nan"), float("inf")


def run(spec: MonitorSpec, values: list[float | None], direction: str = "min") -> list[bool]:
    tracker = MonitorTracker(spec, direction)
    return [tracker.decide(v).improved for v in values]


def test_first_finite_value_improves_and_ties_never_do() -> None:
    spec = MonitorSpec()
    assert improved(5.0, None, direction="min")
    assert improved(-5.0, None, direction="max")
    assert not improved(1.0, 1.0, direction="min")
    assert not improved(1.0, 1.0, direction="max")
    assert not spec.improved(1.0, 1.0)
    assert spec.improved(0.99, 1.0)
    assert run(spec, [1.0, 1.0, 1.0]) == [True, False, False]


def test_improvement_must_exceed_min_delta_in_the_direction() -> None:
    assert improved(0.5, 0.8, direction="min", min_delta=0.2)
    assert not improved(0.7, 0.8, direction="min", min_delta=0.2)
    assert improved(0.9, 0.6, direction="max", min_delta=0.2)
    assert not improved(0.7, 0.6, direction="max", min_delta=0.2)
    assert not improved(0.5, 0.8, direction="max")


def test_non_finite_values_never_improve() -> None:
    for value in (NAN, INF, -INF, None):
        assert not improved(value, None, direction="min")
        assert not improved(value, 1.0, direction="max")
    assert run(MonitorSpec(), [NAN, 2.0, -INF, 1.0]) == [False, True, False, True]


class _NoParams(torch.optim.Optimizer):
    """Just enough optimizer for a plateau scheduler (no parameters, no step)."""

    def __init__(self) -> None:
        self.param_groups = [{"lr": 1.0, "params": []}]
        self.defaults = {}
        self.state = {}


@settings(max_examples=150, deadline=None)
@given(values=st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=12),
       min_delta=st.floats(0, 10), direction=st.sampled_from(["min", "max"]))
def test_decisions_equal_an_absolute_threshold_plateau_scheduler(
        values: list[float], min_delta: float, direction: str) -> None:
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
        _NoParams(), mode=direction, threshold_mode="abs", threshold=min_delta, patience=1000)
    tracker = MonitorTracker(MonitorSpec(min_delta=min_delta, mode=direction), direction)
    for v in values:
        plateau.step(v)
        assert tracker.decide(v).improved == (plateau.num_bad_epochs == 0)
    assert tracker.best == plateau.best


def test_direction_is_the_mode_or_the_metrics_natural_one() -> None:
    assert MonitorSpec().direction() == "min"
    assert MonitorSpec(metric="error", split="train").direction() == "min"
    assert MonitorSpec(metric="loss", mode="max").direction() == "max"
    modes = metric_modes([MetricSpec("accuracy", name="acc"), MetricSpec("nll")])
    assert MonitorSpec(metric="acc").direction(modes) == "max"
    assert MonitorSpec(metric="nll").direction(modes) == "min"
    assert MonitorSpec(metric="acc", mode="min").direction(modes) == "min"
    assert MonitorSpec(metric="acc").improved(0.9, 0.8, direction="max")


def test_an_undeclared_metric_has_no_natural_direction() -> None:
    with pytest.raises(ValueError, match=r"MonitorSpec\(metric='auc'\) has no natural "
                                         r"direction.*declared: 'nll'"):
        MonitorSpec(metric="auc").direction({"nll": "min"})
    with pytest.raises(ValueError, match=r"none declared"):
        MonitorSpec(metric="auc").improved(1.0, 2.0)


def test_check_monitor_refuses_an_undeclared_metric() -> None:
    check_monitor(MonitorSpec(), [])
    check_monitor(MonitorSpec(metric="error", split="train"), [])
    check_monitor(MonitorSpec(metric="nll"), ["nll", "brier"])
    with pytest.raises(ValueError, match=r"MonitorSpec\(metric='acc'\) names no declared metric "
                                         r"\(declared: 'brier', 'nll'\); monitor 'loss', "
                                         r"'error' or declare MetricSpec\('acc'\)"):
        check_monitor(MonitorSpec(metric="acc"), ["nll", "brier"])


def test_check_monitor_refuses_a_non_spec() -> None:
    with pytest.raises(ValueError, match=r"monitor must be a MonitorSpec"):
        check_monitor("val_edp.loss", [])  # type: ignore[arg-type]


# -- construction -----------------------------------------------------------------------------

def test_spec_state_omits_defaults_and_round_trips() -> None:
    assert MonitorSpec().state() == {}
    spec = MonitorSpec(metric="nll", split="train", mode="min", min_delta=0.01,
                       on_missing="error", on_nonfinite="error")
    state = spec.state()
    assert state == {"metric": "nll", "split": "train", "mode": "min", "min_delta": 0.01,
                     "on_missing": "error", "on_nonfinite": "error"}
    assert MonitorSpec.from_state(state) == spec
    assert MonitorSpec(min_delta=0).state() == {}
    assert hash(spec) == hash(MonitorSpec.from_state(state))
    assert spec.key == "train.nll"


def test_the_metric_is_positional_and_the_rest_keyword_only() -> None:
    """§24 / §26 write MonitorSpec("auroc"), MonitorSpec("ndcg_at_10")."""
    assert MonitorSpec("auroc") == MonitorSpec(metric="auroc")
    assert MonitorSpec("auroc").state() == {"metric": "auroc"}
    assert MonitorSpec("nll", split="train", min_delta=0.01).key == "train.nll"
    with pytest.raises(TypeError):
        MonitorSpec("nll", "train")  # type: ignore[misc]


@pytest.mark.parametrize(("kw", "message"), [
    ({"split": "test"}, "MonitorSpec.split must be one of 'val', 'train'; got 'test'"),
    ({"mode": "auto"}, "MonitorSpec.mode must be one of 'min', 'max'; got 'auto'"),
    ({"min_delta": -0.1}, "MonitorSpec.min_delta must be >= 0; got -0.1"),
    ({"min_delta": NAN}, "MonitorSpec.min_delta must be a finite real number >= 0"),
    ({"min_delta": INF}, "MonitorSpec.min_delta must be a finite real number >= 0"),
    ({"min_delta": True}, "MonitorSpec.min_delta must be a finite real number >= 0"),
    ({"min_delta": "0.1"}, "MonitorSpec.min_delta must be a finite real number >= 0"),
    ({"on_missing": "warn"}, "MonitorSpec.on_missing must be one of 'skip', 'error'"),
    ({"on_nonfinite": "ignore"}, "MonitorSpec.on_nonfinite must be one of 'skip', 'error'"),
    ({"metric": None}, "MonitorSpec.metric must be 'loss', 'error' or a declared metric"),
    ({"metric": ""}, "MonitorSpec.metric must be 'loss', 'error' or a declared metric"),
    ({"metric": 3}, "MonitorSpec.metric must be 'loss', 'error' or a declared metric"),
])
def test_spec_refusals(kw, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        MonitorSpec(**kw)


# -- policies and records ---------------------------------------------------------------------

def test_missing_under_skip_is_a_non_decision() -> None:
    tracker = MonitorTracker(MonitorSpec(), "min")
    tracker.decide(1.0)
    record = tracker.decide(None)
    assert (record.status, record.improved, record.value, record.decided) == (
        "missing", False, None, False)
    assert tracker.best == 1.0
    assert tracker.decide(0.5).improved


def test_missing_under_error_raises() -> None:
    tracker = MonitorTracker(MonitorSpec(metric="nll", on_missing="error"), "min")
    with pytest.raises(MonitorUnavailableError, match=r"monitor val.nll has no value this epoch"):
        tracker.decide(None)


def test_nonfinite_under_skip_is_an_epoch_without_improvement() -> None:
    tracker = MonitorTracker(MonitorSpec(), "min")
    tracker.decide(1.0)
    record = tracker.decide(NAN)
    assert record.status == "nonfinite" and not record.improved and record.decided
    assert math.isnan(record.value)
    assert tracker.best == 1.0


def test_nonfinite_under_error_raises() -> None:
    tracker = MonitorTracker(MonitorSpec(split="train", on_nonfinite="error"), "min")
    with pytest.raises(MonitorUnavailableError, match=r"monitor train.loss is inf this epoch"):
        tracker.decide(INF)
    assert issubclass(MonitorUnavailableError, RuntimeError)


def test_record_state_round_trips() -> None:
    tracker = MonitorTracker(MonitorSpec(metric="acc", min_delta=0.05), "max")
    record = tracker.decide(0.9)
    state = record.state()
    assert state == {"metric": "acc", "split": "val", "direction": "max", "min_delta": 0.05,
                     "value": 0.9, "status": "ok", "improved": True}
    assert MonitorRecord.from_state(state) == record
    missing = tracker.decide(None)
    assert "value" not in missing.state()
    assert MonitorRecord.from_state(missing.state()) == missing


def test_record_refuses_an_unknown_status() -> None:
    with pytest.raises(ValueError, match=r"MonitorRecord.status must be one of"):
        MonitorRecord(metric="loss", split="val", direction="min", min_delta=0.0, value=1.0,
                      status="late", improved=False)


def test_record_from_state_refuses_unknown_fields() -> None:
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['patience'\]"):
        MonitorRecord.from_state({"metric": "loss", "split": "val", "direction": "min",
                                  "min_delta": 0.0, "status": "ok", "improved": True,
                                  "patience": 3})


def test_tracker_refuses_an_unknown_direction() -> None:
    with pytest.raises(ValueError, match=r"MonitorTracker direction must be one of"):
        MonitorTracker(MonitorSpec(), "lower")


# -- resume -----------------------------------------------------------------------------------

def test_a_resumed_tracker_decides_like_the_uninterrupted_one() -> None:
    spec = MonitorSpec(metric="nll", min_delta=0.01)
    values = [0.8, 0.7, 0.695, 0.71, 0.65, 0.645, 0.6]
    straight = run(spec, values)
    first = MonitorTracker(spec, "min")
    head = [first.decide(v).improved for v in values[:3]]
    resumed = MonitorTracker(spec, "min")
    resumed.load_state_dict(first.state_dict())
    tail = [resumed.decide(v).improved for v in values[3:]]
    assert head + tail == straight == [True, True, False, False, True, False, True]


def test_a_fresh_tracker_improves_on_its_first_value() -> None:
    assert run(MonitorSpec(), [5.0]) == [True]


def test_loading_another_monitors_state_is_refused() -> None:
    saved = MonitorTracker(MonitorSpec(metric="nll"), "min").state_dict()
    tracker = MonitorTracker(MonitorSpec(metric="acc"), "max")
    with pytest.raises(ValueError, match=r"cannot continue monitor val.acc: metric: saved 'nll', "
                                         "now 'acc', direction: saved 'min', now 'max'"):
        tracker.load_state_dict(saved)


def test_read_takes_the_splits_record_value() -> None:
    from nnx._foundation.records import NNEvaluationDataPoint

    edp = NNEvaluationDataPoint(loss=0.4, error=0.1, metrics={"nll": 0.3})
    assert MonitorSpec().read(edp) == 0.4
    assert MonitorSpec(metric="error").read(edp) == 0.1
    assert MonitorSpec(metric="nll").read(edp) == 0.3
    assert MonitorSpec(metric="brier").read(edp) is None
    assert MonitorSpec().read(None) is None
    empty = NNEvaluationDataPoint(kind="regression", count=0, status="empty")
    assert MonitorSpec(metric="mse").read(empty) is None
