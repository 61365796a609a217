"""nnx.calibration/1 JSON (spec §18): float64-exact reloads and every load refusal."""

from __future__ import annotations

import json

import numpy as np
import pytest
from _decisions_data import LABELS, SPLITS, overconfident

from nnx.calibration import (
    CalibrationError,
    CalibrationReport,
    TemperatureCalibrator,
    fit_temperature,
)


@pytest.fixture(scope="module")
def calibrator() -> TemperatureCalibrator:
    z, t = overconfident(300, seed=31)
    return fit_temperature(z, t, LABELS, model_id="m", **SPLITS).require()


def test_a_reloaded_calibrator_gives_identical_probabilities_and_an_equal_report(
        calibrator, tmp_path) -> None:
    path = tmp_path / "calibrator.json"
    calibrator.save(path)
    again = TemperatureCalibrator.load(path)
    assert again == calibrator and again.temperature == calibrator.temperature
    assert again.calibrator_id == calibrator.calibrator_id
    assert json.loads(path.read_text())["format"] == "nnx.calibration/1"
    z, t = overconfident(100, seed=32)
    a = calibrator.transform(z, labels=LABELS, model_id="m")
    b = again.transform(z, labels=LABELS, model_id="m")
    assert np.array_equal(a.calibrated_probabilities, b.calibrated_probabilities)
    report = calibrator.report(z, t, split_id="test", labels=LABELS, model_id="m")
    assert again.report(z, t, split_id="test", labels=LABELS, model_id="m") == report
    report.save(tmp_path / "report.json")
    assert CalibrationReport.load(tmp_path / "report.json") == report
    assert CalibrationReport.from_json(report.to_json()) == report


def test_the_file_is_written_through_the_atomic_writer(calibrator, tmp_path) -> None:
    path = tmp_path / "c.json"
    path.write_text("old")
    calibrator.save(path)
    assert [p.name for p in tmp_path.iterdir()] == ["c.json"]  # no temp left beside it
    assert TemperatureCalibrator.load(path) == calibrator


def _document(calibrator: TemperatureCalibrator, **changes) -> str:
    doc = calibrator.document()
    for key, value in changes.items():
        if key.startswith("split_"):
            doc["split"][key[6:]] = value
        elif value is ...:
            del doc[key]
        else:
            doc[key] = value
    return json.dumps(doc)


@pytest.mark.parametrize(("changes", "match"), [
    ({"temperature": 0.0}, "temperature must be finite and > 0"),
    ({"temperature": -1.5}, "temperature must be finite and > 0"),
    ({"temperature": float("inf")}, "temperature must be finite and > 0"),
    ({"temperature": float("nan")}, "temperature must be finite and > 0"),
    ({"temperature": True}, "temperature must be finite and > 0"),
    ({"labels": ["cat", "cat", "fox"]}, "duplicates"),
    ({"model_id": ...}, "misses"),
    ({"model_id": ""}, "model id"),
    ({"split_calibration": "train"}, "equals the train split"),
    ({"split_calibration": "test"}, "equals the test split"),
    ({"format": "nnx.calibration/2"}, "not a nnx.calibration/1 document"),
    ({"kind": "calibration_report"}, "expected 'temperature_calibrator'"),
])
def test_loading_refuses_each_broken_document(calibrator, changes, match) -> None:
    with pytest.raises(CalibrationError, match=match):
        TemperatureCalibrator.from_json(_document(calibrator, **changes))


def test_loading_refuses_a_file_that_is_not_json(tmp_path) -> None:
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CalibrationError, match="not JSON"):
        TemperatureCalibrator.load(tmp_path / "bad.json")
