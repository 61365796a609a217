"""The runs report (``nnx runs report``): one self-contained HTML page over several runs,
read from their run directories alone (no model is built).

The page holds, in order: a table of the runs side by side (status, BEST and its score,
created, data id: each run's ``nnx runs list`` row); one Plotly figure with their
training and validation losses overlaid (one trace per run per series, one colour per
run) and, for the runs with a named monitor, the monitor with its improving epochs
starred as the run chart stars them; and the configuration fields that differ between
the runs (run.yaml flattened to dotted keys, identical keys counted, not shown).
plotly.js is inlined once; every string from a run is HTML-escaped.
"""

from __future__ import annotations

import html
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnx.extend import atomic_write_text
from nnx.vis_utils.chart import IMPROVED
from nnx.vis_utils.curves import epoch_series
from nnx.vis_utils.document import load_run
from nnx.vis_utils.runs_table import RUN_COLUMNS, config_diff, run_row, short_labels
from nnx.viz import extras

__all__ = ["FIGURE_ID", "runs_report", "runs_report_figure", "write_runs_report"]

#: The id of the page's curves ``<div>`` (the Plotly figure).
FIGURE_ID = "runs-curves"

# One colour per run, the same on each of its traces and its swatch in the table
# (Plotly's default qualitative palette, cycled past ten runs).
_PALETTE = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3", "#ff6692",
            "#b6e880", "#ff97ff", "#fecb52")

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }
th { background: #f3f3f3; }
td.run-id, td.value { font-family: ui-monospace, monospace; }
span.swatch { display: inline-block; width: 0.8em; height: 0.8em; margin-right: 0.4em; }
"""


def _loaded(owner: str, runs: Sequence[Any], root: str | os.PathLike[str]) -> list[Any]:
    if isinstance(runs, (str, bytes)) or not isinstance(runs, Sequence):
        raise TypeError(f"{owner}: runs must be a sequence of NNRun objects or run ids; got "
                        f"{type(runs).__name__}")
    loaded: dict[str, Any] = {}
    for run in runs:
        one = load_run(owner, run, root)
        loaded.setdefault(one.id, one)  # a run named twice is reported once
    if not loaded:
        raise ValueError(f"{owner}: no runs to report")
    return list(loaded.values())


def _run_traces(go: Any, run_id: str, label: str, s: Any, colour: str) -> list[Any]:
    """``(row, trace)`` for each of one run's series: the losses in row 1, the monitor and
    its improving epochs in row 2. Each trace's meta names the run and the series, so a
    reader of the drawn figure (the browser test) finds it without parsing its name."""

    def scatter(name: str, what: str, x: list[Any], y: list[Any], **style: Any) -> Any:
        return go.Scatter(x=x, y=y, name=f"{label} {name}", legendgroup=run_id,
                          meta={"run": run_id, "series": what}, **style)

    traces = [(1, scatter("train loss", "train", s.epochs, s.train_loss, mode="lines+markers",
                          line={"color": colour, "dash": "dot"})),
              (1, scatter("val loss", "val", s.epochs, s.val_loss, mode="lines+markers",
                          line={"color": colour}))]
    if s.monitor:
        marked = [v for v, up in zip(s.monitor_value, s.improved, strict=True) if up]
        traces += [(2, scatter(f"monitor {s.monitor}", "monitor", s.epochs, s.monitor_value,
                               mode="lines+markers", line={"color": colour})),
                   (2, scatter(IMPROVED, IMPROVED, s.improved_epochs, marked, mode="markers",
                               marker={"symbol": "star", "size": 14, "color": colour}))]
    return traces


def _figure(owner: str, runs: list[Any]) -> Any:
    go, subplots = extras.plotly(owner)
    series = [epoch_series(run.epoch_records()) for run in runs]
    monitored = any(s.monitor for s in series)
    fig = subplots.make_subplots(rows=2 if monitored else 1, cols=1, shared_xaxes=True,
                                 vertical_spacing=0.1,
                                 subplot_titles=("loss", "monitor") if monitored else None)
    labels = short_labels([run.id for run in runs])
    for i, (run, label, s) in enumerate(zip(runs, labels, series, strict=True)):
        for row, trace in _run_traces(go, run.id, label, s, _PALETTE[i % len(_PALETTE)]):
            fig.add_trace(trace, row=row, col=1)
    fig.update_xaxes(title_text="epoch", row=2 if monitored else 1, col=1)
    fig.update_layout(title=f"{len(runs)} runs: training (dotted) and validation loss",
                      height=720 if monitored else 460)
    return fig


def runs_report_figure(runs: Sequence[Any], *, root: str | os.PathLike[str] = "runs") -> Any:
    """The report's figure over ``runs`` (``NNRun`` objects or run ids under ``root``):
    each run's training loss (dotted) and validation loss in one colour per run and, in
    a second row when a run has a named monitor, the monitor with its improving epochs
    starred (trace name ``"<id prefix> improved"``)."""
    owner = "nnx.vis_utils.runs_report_figure"
    extras.plotly(owner)  # the missing extra is named before any run is read
    return _figure(owner, _loaded(owner, runs, root))


def _cells(values: Sequence[str], css: str = "") -> str:
    attr = f' class="{css}"' if css else ""
    return "".join(f"<td{attr}>{html.escape(v)}</td>" for v in values)


def _runs_table(runs: list[Any]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in RUN_COLUMNS)
    body = []
    for i, run in enumerate(runs):
        run_id, *rest = run_row(run)
        swatch = f'<span class="swatch" style="background:{_PALETTE[i % len(_PALETTE)]}">' \
                 "</span>"
        body.append(f'<tr><td class="run-id">{swatch}{html.escape(run_id)}</td>'
                    f"{_cells(rest)}</tr>")
    return f'<table id="runs"><tr>{head}</tr>{"".join(body)}</table>'


def _config_table(runs: list[Any]) -> str:
    diff = config_diff([run.state() for run in runs])
    same = f"{diff.identical} identical field{'s' if diff.identical != 1 else ''} not shown"
    if not diff.rows:
        return f"<p>No configuration field differs between the runs ({same}).</p>"
    head = "<th>field</th>" + "".join(f"<th>{html.escape(run.id)}</th>" for run in runs)
    body = "".join(f"<tr><th>{html.escape(key)}</th>{_cells(values, 'value')}</tr>"
                   for key, values in diff.rows)
    count = len(diff.rows)
    return (f"<p>{count} field{'s' if count != 1 else ''} differ; {same}.</p>"
            f'<table id="config"><tr>{head}</tr>{body}</table>')


def runs_report(runs: Sequence[Any], *, root: str | os.PathLike[str] = "runs") -> str:
    """The report over ``runs`` (``NNRun`` objects or run ids under ``root``; a run named
    twice is shown once) as one HTML page: the runs table, the curves, the differing
    configuration fields. plotly.js is inlined (no ``<script src>``): it opens offline."""
    owner = "nnx.vis_utils.runs_report"
    extras.plotly(owner)
    import plotly.io as pio  # extras.plotly found Plotly

    loaded = _loaded(owner, runs, root)
    # Read every table before drawing: a damaged run fails the report before any work.
    runs_table, config_table = _runs_table(loaded), _config_table(loaded)
    figure = pio.to_html(_figure(owner, loaded), include_plotlyjs=True, full_html=False,
                         validate=True, div_id=FIGURE_ID)
    title = f"NNx runs report: {len(loaded)} run{'s' if len(loaded) != 1 else ''}"
    return (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><h2>Runs</h2>{runs_table}"
            f"<h2>Training and validation loss</h2>{figure}"
            f"<h2>Configuration fields that differ</h2>{config_table}</body></html>\n")


def write_runs_report(runs: Sequence[Any], path: str | os.PathLike[str], *,
                      root: str | os.PathLike[str] = "runs") -> Path:
    """:func:`runs_report` written atomically at ``path`` (nothing is written when a run
    cannot be read); the path written."""
    return atomic_write_text(path, runs_report(runs, root=root))
