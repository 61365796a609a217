"""The runs report (``nnx runs report``): one self-contained page over several runs, its
figure checked against the runs' histories as headless Chromium drew it, a screenshot
that is not blank, every run's id shown, and the configuration fields that differ."""

from __future__ import annotations

import json

import plotly.io as pio
import pytest
from _browser import open_drawn, screenshot_stats
from _runs_tiny import report_runs, script_tags

from nnx.testing import tiny_model, tiny_train_params
from nnx.vis_utils import VisUtils, runs_report_figure, write_runs_report
from nnx.vis_utils.runs_report import FIGURE_ID
from nnx.vis_utils.runs_table import config_diff, flatten, short_labels

# A data id that would run as a script, were the page not to escape it.
HOSTILE = "<img src=x onerror=\"window.owned=1\"><script>window.owned=1</script>"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """Three tiny runs (lr 0.05 / 0.2, hidden 8 / 5; a hostile data id) and their report,
    made once."""
    where = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(where)  # runs/ lands in a scratch directory
        runs = report_runs(data_id=HOSTILE)
        page = write_runs_report([run.id for run in runs], where / "report.html",
                                 root=where / "runs")
    return runs, page


def expected_traces(run):
    """What the figure must hold for ``run``, from its epoch records: series -> (x, y)."""
    records = run.epoch_records()
    epochs = [idp.epoch for idp in records]
    improved = [idp for idp in records if idp.selection.improved]
    return {
        "train": (epochs, [idp.train_summary.loss for idp in records]),
        "val": (epochs, [idp.val_edp.loss for idp in records]),
        "monitor": (epochs, [idp.selection.value for idp in records]),
        "improved": ([idp.epoch for idp in improved], [idp.selection.value for idp in improved]),
    }


def by_run_and_series(data):
    found = {}
    for t in data:
        key = (t["meta"]["run"], t["meta"]["series"])
        assert key not in found, key  # one trace per run per series
        found[key] = (t["x"], t["y"])
    return found


def test_the_report_is_one_self_contained_page(trained):
    _runs, page = trained
    scripts = script_tags(page)
    assert scripts and all("src" not in attrs for attrs in scripts)  # nothing fetched
    text = page.read_text(encoding="utf-8")
    assert text.count("plotly.js v") == 1  # the library inlined once


def test_the_report_figure_validates_and_overlays_every_run(trained):
    runs, page = trained
    figure = json.loads(pio.to_json(runs_report_figure(runs), validate=True))
    traces = by_run_and_series(figure["data"])
    for run in runs:
        for series, (x, y) in expected_traces(run).items():
            assert traces[(run.id, series)] == (x, y)
    # Run ids under a root read the same runs; VisUtils names the same call.
    by_id = runs_report_figure([run.id for run in runs], root=page.parent / "runs")
    assert json.loads(pio.to_json(by_id)) == figure
    assert VisUtils.runs_report_figure is runs_report_figure


def test_chromium_draws_the_runs_histories_exactly(browser, trained):
    runs, page = trained
    figures = open_drawn(browser, page)
    assert [f["id"] for f in figures] == [FIGURE_ID]
    drawn = by_run_and_series(figures[0]["data"])
    for run in runs:
        for series, xy in expected_traces(run).items():
            assert drawn[(run.id, series)] == xy  # the exact floats the histories record
    assert len(drawn) == 4 * len(runs)


def test_the_drawn_report_is_not_blank_and_shows_every_run_id(browser, trained):
    runs, page = trained
    open_drawn(browser, page)
    colours, inked = screenshot_stats(browser)
    assert colours > 50 and inked > 0.02, (colours, inked)
    from selenium.webdriver.common.by import By

    cells = browser.find_elements(By.CSS_SELECTOR, "#runs td.run-id")
    assert [c.text for c in cells] == [run.id for run in runs]
    assert all(c.is_displayed() for c in cells)
    headers = [h.text for h in browser.find_elements(By.CSS_SELECTOR, "#config th")]
    assert headers[:1 + len(runs)] == ["field", *(run.id for run in runs)]
    # The hostile data id is shown as text in each row, and none of it ran.
    data_ids = browser.find_elements(By.CSS_SELECTOR, "#runs td:nth-child(8)")
    assert [c.text for c in data_ids] == [HOSTILE] * len(runs)
    assert browser.execute_script("return window.owned === undefined")


def test_the_configuration_table_holds_exactly_the_differing_fields(trained):
    runs, _page = trained
    diff = config_diff([run.state() for run in runs])
    assert [key for key, _values in diff.rows] == ["net.hidden_dims", "train.optim.max_lr"]
    assert dict(diff.rows) == {"net.hidden_dims": ["[8]", "[8]", "[5]"],
                               "train.optim.max_lr": ["0.05", "0.2", "0.05"]}
    assert diff.identical == len(flatten(runs[0].state())) - 2
    assert f"{diff.identical} identical fields not shown" in trained[1].read_text("utf-8")


def test_flatten_and_config_diff_on_documents():
    doc = {"a": {"b": 1, "c": [1, 2]}, "d": {}, "e": "x"}
    assert flatten(doc) == {"a.b": 1, "a.c": [1, 2], "d": {}, "e": "x"}
    diff = config_diff([{"a": 1, "s": "1"}, {"a": "1", "s": "1", "only": None}])
    assert dict(diff.rows) == {"a": ["1", "1"], "only": ["(absent)", "null"]}  # 1 vs "1"
    assert diff.identical == 1


def test_short_labels_are_unique_prefixes():
    assert short_labels(["abcdefgh12", "abcdefgh34", "zz"]) == ["abcdefgh1", "abcdefgh3", "zz"]


def test_no_runs_and_a_bad_runs_argument_are_refused(tmp_path):
    with pytest.raises(ValueError, match="no runs to report"):
        write_runs_report([], tmp_path / "r.html")
    with pytest.raises(TypeError, match="sequence of NNRun objects or run ids"):
        write_runs_report("abc", tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_runs_without_validation_or_monitor_are_drawn_with_gaps(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plain = tiny_model().train(tiny_train_params(n_epochs=2), verbose=False)
    figure = json.loads(pio.to_json(runs_report_figure([plain]), validate=True))
    traces = by_run_and_series(figure["data"])
    assert set(traces) == {(plain.id, "train"), (plain.id, "val")}  # no monitor row
    assert traces[(plain.id, "val")] == ([0, 1], [None, None])  # no validation: gaps
    page = write_runs_report([plain], tmp_path / "one.html").read_text(encoding="utf-8")
    assert "No configuration field differs between the runs" in page
