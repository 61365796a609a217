"""Every figure nnx-viz draws, drawn by headless Chromium: each page's figure is drawn (its
traces in the browser's ``.data``) and its screenshot is not blank. The run chart is also
checked against its run's history; the runs report's own render is test_runs_report.py's.
Figures whose extra is absent (Captum, scikit-learn) skip, naming it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import plotly.io as pio
import pytest
import torch
import torch.nn.functional as F
from _browser import open_drawn, screenshot_stats
from _runs_tiny import monitored_run
from _viz_tiny import feed_forward, mixed
from torch import nn

from nnx.lr_finder import lr_finder
from nnx.testing import tiny_batches
from nnx.vis_utils import VisUtils, write_run_chart
from nnx.viz import activation_map, attribute, gradient_flow, weight_histogram


def assert_drawn(browser, page, n_traces: int) -> list[dict]:
    figures = open_drawn(browser, page)
    assert len(figures) == 1 and len(figures[0]["data"]) == n_traces
    colours, inked = screenshot_stats(browser)
    assert colours > 50 and inked > 0.02, (colours, inked)
    return figures[0]["data"]


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    return tmp_path


def test_chromium_draws_the_run_chart(browser, in_tmp):
    run = monitored_run(n_epochs=2)
    data = assert_drawn(browser, write_run_chart(run, in_tmp / "chart.html"), 5)
    records = run.epoch_records()
    val = next(t for t in data if t["name"] == "val loss")
    assert val["x"] == [idp.epoch for idp in records]
    assert val["y"] == [idp.val_edp.loss for idp in records]


def _gradient_flow() -> Any:
    net = mixed()
    net(torch.randn(5, 4)).sum().backward()
    return gradient_flow(net)


def _attribution() -> Any:
    pytest.importorskip("captum", reason="attribute needs nnx-viz[captum]")
    net = nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 3))
    return attribute(net, torch.randn(4, 5), method="saliency", target=0)[1]


def _tsne() -> Any:
    pytest.importorskip("sklearn", reason="the t-SNE needs nnx-viz[tsne]")
    run = monitored_run(1)
    return VisUtils.two_dim_tsne_checkpoint_logits(run.checkpoints_dir / "last.pt",
                                                   tiny_batches(3), perplexity=5.0)[1]


def _lr_finder() -> Any:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))
    return lr_finder(net, tiny_batches(4), loss_fn=F.cross_entropy, num_iter=8).figure


FIGURES: dict[str, Callable[[], Any]] = {
    "weight_histogram": lambda: weight_histogram(feed_forward()),
    "activation_map": lambda: activation_map(feed_forward(), torch.randn(4, 8), "layers.0"),
    "gradient_flow": _gradient_flow,
    "attribute": _attribution,
    "training_curves": lambda: VisUtils.training_curves(monitored_run(2)),
    "history_curves": lambda: VisUtils.history_curves(monitored_run(2).id),
    "confusion_matrix": lambda: VisUtils.confusion_matrix([0, 1, 2, 1], [0, 2, 2, 1]),
    "two_dim_tsne_checkpoint_logits": _tsne,
    "lr_finder": _lr_finder,
}


@pytest.mark.parametrize("name", list(FIGURES))
def test_chromium_draws_every_figure(browser, in_tmp, name):
    figure = FIGURES[name]()
    page = in_tmp / f"{name}.html"
    pio.write_html(figure, page, include_plotlyjs=True, full_html=True, validate=True)
    data = assert_drawn(browser, page, len(figure.data))
    assert [t["type"] for t in data] == [t.type or "scatter" for t in figure.data]
