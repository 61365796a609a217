"""ComparisonReport (spec §23): rows, text, strict JSON and results re-derived on load."""

from __future__ import annotations

import json
import math

import pytest
from _observations import obs, side

from nnx.comparison import (
    Bootstrap,
    ComparisonError,
    ComparisonReport,
    ReportIntegrityError,
    compare,
)

PAIRING = "seed: the same data order and split"


def _report() -> ComparisonReport:
    a = [*side("A", [0.5, 0.6, 0.7]), obs("A9", math.nan, seed=9)]
    b = [*side("B", [0.4, 0.5, 0.65]), obs("B8", 0.1, seed=8, config="B", status="failed")]
    return ComparisonReport.build(a + b, [compare(a, b, pairing=PAIRING,
                                                  bootstrap=Bootstrap(seed=3, resamples=200))])


def test_table_has_one_plain_json_row_per_group_observation_comparison_pair_and_unmatched():
    rows = _report().table()
    kinds = [row["row"] for row in rows]
    assert kinds == (["group"] + ["observation"] * 4) * 2 + ["comparison"] + ["pair"] * 3 + [
        "unmatched"] * 2
    json.dumps(rows, allow_nan=False)  # strict JSON: the NaN value is written by name
    assert rows[4]["value"] == "NaN" and rows[0]["differing"] == ["config"]
    comparison = rows[10]
    assert comparison["n"] == 3 and comparison["interval"]["seed"] == 3


def test_text_names_every_run_attempt_status_rule_and_signed_delta():
    text = _report().text()
    for run in ("A0", "A1", "A2", "A9", "B0", "B1", "B2", "B8"):
        assert f"run {run} attempt {run}-attempt" in text
    assert "not_completed=1" in text and "failed" in text and "last" in text
    assert "delta=-0.1" in text and "unmatched, only on side A" in text


def test_save_and_load_round_trip_and_edited_results_are_refused(tmp_path):
    report = _report()
    path = tmp_path / "report.json"
    report.save(path)
    loaded = ComparisonReport.load(path)
    assert loaded.table() == report.table() and loaded.text() == report.text()
    doc = json.loads(path.read_text())
    assert doc["format"] == "nnx.comparison/1"
    edited = dict(doc)
    edited["results"] = [dict(r) for r in doc["results"]]
    edited["results"][0]["mean"] = 0.1
    path.write_text(json.dumps(edited))
    with pytest.raises(ReportIntegrityError, match="disagree"):
        ComparisonReport.load(path)
    tampered = dict(doc)
    tampered["observations"] = [dict(o) for o in doc["observations"]]
    tampered["observations"][0]["value"] = 0.9  # an observation edited, results left
    path.write_text(json.dumps(tampered))
    with pytest.raises(ReportIntegrityError):
        ComparisonReport.load(path)


def test_load_refuses_what_is_not_a_strict_report(tmp_path):
    path = tmp_path / "r.json"
    report = _report()
    report.save(path)
    text = path.read_text()
    path.write_text(text.replace('"NaN"', "NaN"))
    with pytest.raises(ValueError):
        ComparisonReport.load(path)
    path.write_text(json.dumps({"format": "nnx.comparison/2"}))
    with pytest.raises(ValueError, match=r"nnx\.comparison/1"):
        ComparisonReport.load(path)


def test_build_refuses_a_comparison_of_observations_it_does_not_hold():
    a, b = side("A", [0.5, 0.6]), side("B", [0.4, 0.5])
    with pytest.raises(ComparisonError, match="not among"):
        ComparisonReport.build(a, [compare(a, b, pairing=PAIRING)])


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy: the sums overflowed
def test_an_overflowing_mean_and_paired_delta_save_and_load(tmp_path):
    # Every value and every delta (1.2e308) is finite, but the sums overflow: A's mean,
    # B's mean, the mean of the deltas and the bootstrap's resampled means are infinite.
    a = side("A", [-0.6e308] * 3)
    b = side("B", [0.6e308] * 3)
    comparison = compare(a, b, pairing=PAIRING, bootstrap=Bootstrap(seed=1, resamples=20))
    assert [p.status for p in comparison.pairs] == ["ok"] * 3
    report = ComparisonReport.build(a + b, [comparison])
    rows = report.table()
    json.dumps(rows, allow_nan=False)  # strict JSON rows
    groups = [r for r in rows if r["row"] == "group"]
    assert [g["mean"] for g in groups] == ["-Infinity", "Infinity"]
    (head,) = [r for r in rows if r["row"] == "comparison"]
    assert head["mean"] == "Infinity" and head["n"] == 3
    path = tmp_path / "report.json"
    report.save(path)
    loaded = ComparisonReport.load(path)
    assert loaded.table() == rows and loaded.text() == report.text()
