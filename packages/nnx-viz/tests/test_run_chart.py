"""The run chart (spec §6.4) through nnx-viz, NNRun.chart and ``nnx runs show --plot``:
one self-contained HTML file whose figure holds the run's whole-epoch training loss, its
validation loss, the monitor series with the improving epochs marked, and the LR."""

from __future__ import annotations

import json

import plotly.io as pio
import pytest
from _runs_tiny import html_figure, monitored_run, script_tags, trace

from nnx.cli import main
from nnx.vis_utils import run_chart


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    return tmp_path


def assert_chart_of(run, figure) -> None:
    records = run.epoch_records()
    epochs = [idp.epoch for idp in records]
    assert trace(figure, "train loss (whole epoch)")["y"] == [idp.train_summary.loss
                                                             for idp in records]
    assert trace(figure, "val loss")["y"] == [idp.val_edp.loss for idp in records]
    monitor = trace(figure, "monitor val loss")
    assert monitor["x"] == epochs
    assert monitor["y"] == [idp.selection.value for idp in records]
    improved = [idp.epoch for idp in records if idp.selection.improved]
    assert trace(figure, "improved")["x"] == improved
    assert trace(figure, "lr")["y"] == [idp.lr for idp in records]


def test_the_run_chart_plots_the_run_history_and_marks_improving_epochs():
    run = monitored_run()
    records = run.epoch_records()
    improved = [idp.selection.improved for idp in records]
    assert True in improved and False in improved  # the marks pick some epochs, not all
    figure = json.loads(pio.to_json(run_chart(run), validate=True))
    assert_chart_of(run, figure)
    # A run id under a root reads the same run.
    assert json.loads(pio.to_json(run_chart(run.id, root="runs"))) == figure


def test_nnrun_chart_writes_one_self_contained_html_file(tmp_path):
    run = monitored_run()
    written = run.chart(tmp_path / "chart.html")
    assert written == tmp_path / "chart.html" and written.is_file()
    scripts = script_tags(written)
    assert scripts and all("src" not in attrs for attrs in scripts)  # nothing fetched
    assert "plotly.js v" in written.read_text(encoding="utf-8")  # the library is inlined
    assert_chart_of(run, html_figure(written))


def test_runs_show_plot_writes_the_chart(tmp_path, capsys):
    run = monitored_run(journal=True)
    assert main(["runs", "show", run.id[:12], "--plot", "out.html"]) == 0
    out = capsys.readouterr().out
    assert run.id in out and f"chart: {(tmp_path / 'out.html').resolve()}" in out
    assert_chart_of(run, html_figure(tmp_path / "out.html"))
