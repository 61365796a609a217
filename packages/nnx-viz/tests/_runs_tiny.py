"""Tiny trained runs with a named monitor (one, or a few differing in lr and hidden
dims for the runs report), and the figure JSON a written chart holds."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from nnx import MonitorSpec, NNRun
from nnx.history import HistoryJournal
from nnx.testing import sgd, tiny_batches, tiny_model, tiny_train_params

_NEW_PLOT = re.compile(r'Plotly\.newPlot\(\s*"[^"]+",\s*')


def monitored_run(n_epochs: int = 4, *, journal: bool = False) -> NNRun:
    """Trained under runs/ of the current directory; a val-loss monitor with a min_delta
    some epochs miss, so the chart marks some epochs and not others."""
    params = tiny_train_params(tiny_batches(3), n_epochs=n_epochs, optim=sgd(0.05),
                               val_loader=tiny_batches(2, seed=1),
                               monitor=MonitorSpec(metric="loss", split="val",
                                                   min_delta=0.002))
    history = HistoryJournal(retention=4, chunk_size=2) if journal else None
    return tiny_model().train(params, verbose=False, history=history)


def report_runs(data_id: str | None = None) -> list[NNRun]:
    """Three 2-epoch runs under runs/ of the current directory: two learning rates and
    two hidden widths (so the report's configuration table has two differing keys)."""
    runs = []
    for lr, hidden in ((0.05, 8), (0.2, 8), (0.05, 5)):
        params = tiny_train_params(tiny_batches(3), n_epochs=2, optim=sgd(lr),
                                   val_loader=tiny_batches(2, seed=1), data_id=data_id,
                                   monitor=MonitorSpec(metric="loss", split="val"))
        runs.append(tiny_model(hidden=hidden).train(params, verbose=False))
    return runs


def html_figure(path: Path) -> dict[str, Any]:
    """``{"data": [...], "layout": {...}}`` as the page hands it to Plotly.newPlot."""
    page = path.read_text(encoding="utf-8")
    match = _NEW_PLOT.search(page)
    assert match is not None, "no Plotly.newPlot call in the page"
    decoder = json.JSONDecoder()
    data, end = decoder.raw_decode(page, match.end())
    rest = page[end:].lstrip().removeprefix(",").lstrip()
    layout, _ = decoder.raw_decode(rest)
    return {"data": data, "layout": layout}


def trace(figure: dict[str, Any], name: str) -> dict[str, Any]:
    found = [t for t in figure["data"] if t.get("name") == name]
    assert len(found) == 1, [t.get("name") for t in figure["data"]]
    return found[0]


class _Scripts(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.attrs: list[dict[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "script":
            self.attrs.append(dict(attrs))


def script_tags(path: Path) -> list[dict[str, str | None]]:
    """The attributes of every ``<script>`` tag of the page (not of strings inside one)."""
    parser = _Scripts()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.attrs
