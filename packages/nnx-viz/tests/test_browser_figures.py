"""The run chart and an nnx.viz figure drawn by headless Chromium: each page's figure is
drawn (its traces in the browser's ``.data``) and its screenshot is not blank. (The runs
report's own render: test_runs_report.py.)"""

from __future__ import annotations

import plotly.io as pio
from _browser import open_drawn, screenshot_stats
from _runs_tiny import monitored_run
from _viz_tiny import feed_forward

from nnx.vis_utils import write_run_chart
from nnx.viz import weight_histogram


def assert_drawn(browser, page, n_traces: int) -> list[dict]:
    figures = open_drawn(browser, page)
    assert len(figures) == 1 and len(figures[0]["data"]) == n_traces
    colours, inked = screenshot_stats(browser)
    assert colours > 50 and inked > 0.02, (colours, inked)
    return figures[0]["data"]


def test_chromium_draws_the_run_chart(browser, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = monitored_run(n_epochs=2)
    data = assert_drawn(browser, write_run_chart(run, tmp_path / "chart.html"), 5)
    records = run.epoch_records()
    val = next(t for t in data if t["name"] == "val loss")
    assert val["x"] == [idp.epoch for idp in records]
    assert val["y"] == [idp.val_edp.loss for idp in records]


def test_chromium_draws_a_weight_histogram(browser, tmp_path):
    model = feed_forward()
    figure = weight_histogram(model)
    page = tmp_path / "weights.html"
    pio.write_html(figure, page, include_plotlyjs=True, full_html=True, validate=True)
    data = assert_drawn(browser, page, len(figure.data))
    assert [t["name"] for t in data] == [t.name for t in figure.data]
