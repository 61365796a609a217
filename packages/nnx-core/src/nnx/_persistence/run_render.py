"""How a run reads in a terminal (``str(run)``) and in a notebook (``_repr_html_``).

The notebook view is a table of per-epoch values and an inline SVG chart of
the loss series; it needs no plotting library.
"""

from __future__ import annotations

import html
import math
from typing import Any, Protocol

from nnx._foundation.records import NNIterationDataPoint, first_finite
from nnx._persistence.run_rows import format_score
from nnx.enums.nets import Nets
from nnx.params.descriptors import describe
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.params.optim_factory import NNOptimFactoryParams

__all__ = ["RenderedRun", "best_line", "epoch_rows", "format_score", "loop_lines",
           "render_html", "render_lines", "render_text", "score_label"]


class RenderedRun(Protocol):
    """What the views read of a run (NNRun is one). A protocol rather than NNRun itself,
    because NNRun renders itself through this module: the import runs one way only."""

    @property
    def id(self) -> str: ...
    @property
    def model_params(self) -> NNModelParams: ...
    @property
    def net_params(self) -> NNParams | None: ...
    @property
    def trainer_params(self) -> Any: ...
    @property
    def loop_params(self) -> Any: ...
    @property
    def salt(self) -> str | None: ...
    def epoch_records(self) -> list[NNIterationDataPoint]: ...
    def best_score(self) -> tuple[int, tuple[str, float] | None] | None: ...

_COLUMNS = ("epoch", "train loss", "val loss", "val error", "val acc", "lr")


def _fmt(value: float | None, pct: bool = False) -> str:
    if value is None:
        return "-"
    if math.isnan(value):
        return "nan"
    return f"{value:.1%}" if pct else f"{value:.4g}"


# What a checkpoint's score is, by the name first_finite reports it under.
_SIGNALS = {"val_edp.error": "val error", "val_edp.loss": "val loss",
            "train_edp.error": "train error", "train_edp.loss": "train loss"}


def score_label(idp: NNIterationDataPoint | None, *, named_monitor: bool = False,
                monitor_value: float | None = None) -> tuple[str, float] | None:
    """(what, value) of a checkpoint's score, as NNCheckpoint.score picks it: the named
    monitor ("val nll") when one selected BEST, else the first finite of val error ->
    val loss -> train error -> train loss; None when there is no finite signal."""
    if named_monitor:
        if monitor_value is None or not math.isfinite(monitor_value):
            return None
        selection = None if idp is None else idp.selection
        what = "monitor" if selection is None else f"{selection.split} {selection.metric}"
        return what, monitor_value
    found = None if idp is None else first_finite(idp)
    return None if found is None else (_SIGNALS.get(found[0], found[0]), found[1])


def epoch_rows(run: RenderedRun) -> list[tuple[str, ...]]:
    return _rows(run.epoch_records())


def _rows(records: list[NNIterationDataPoint]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for idp in records:
        train = idp.train_summary or idp.train_edp
        val = idp.val_edp
        rows.append((
            str(idp.epoch),
            _fmt(None if train is None else train.loss),
            _fmt(None if val is None else val.loss),
            _fmt(None if val is None else val.error),
            _fmt(None if val is None else val.accuracy, pct=True),
            _fmt(idp.lr),
        ))
    return rows


def _describe(run: RenderedRun) -> list[tuple[str, str]]:
    model, train = run.model_params, run.loop_params
    net = model.net.name if isinstance(model.net, Nets) else describe(model.net)
    lines = [("run", run.id), ("net", net), ("loss", model.loss.name)]
    if run.net_params is not None:
        p = run.net_params
        lines.append(("shape", f"{p.input_dim} → {list(p.hidden_dims)} → {p.output_dim}, "
                               f"{p.activation.name}, dropout {p.dropout_prob:g}"))
    lines += loop_lines(train, trainer=run.trainer_params is not None, salt=run.salt)
    best = run.best_score()
    if best is not None:
        lines.append(best_line(*best))
    return lines


def loop_lines(loop: Any, *, trainer: bool, salt: str | None) -> list[tuple[str, str]]:
    """The optimizer(s), the epochs and the salt lines of a run's head."""
    lines = []
    named = dict(loop.optims) if trainer else {"optimizer": loop.optim}
    for label, o in named.items():  # a Trainer run shows each named optimizer
        kind = o.factory.label if isinstance(o, NNOptimFactoryParams) else o.name.name
        lines.append((label, f"{kind} max_lr={o.max_lr:g} weight_decay={o.weight_decay:g}"))
    lines.append(("epochs", str(loop.n_epochs)))
    if salt:
        lines.append(("salt", salt))
    return lines


def best_line(epoch: int, found: tuple[str, float] | None) -> tuple[str, str]:
    scored = "no finite score" if found is None else f"{found[0]} {format_score(*found)}"
    return "best", f"epoch {epoch} ({scored})"


def render_text(run: RenderedRun) -> str:
    return render_lines(_describe(run), run.epoch_records())


def render_lines(described: list[tuple[str, str]], records: list[NNIterationDataPoint]) -> str:
    """A head of ``name: value`` lines, then one table row per epoch record."""
    head = [f"{k:>10}: {v}" for k, v in described]
    rows = _rows(records)
    widths = [max(len(c), *(len(r[i]) for r in rows)) if rows else len(c)
              for i, c in enumerate(_COLUMNS)]
    table = ["  ".join(c.rjust(w) for c, w in zip(_COLUMNS, widths, strict=True))]
    table += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join([*head, "", *table])


def _series(records: list[NNIterationDataPoint], split: str) -> list[tuple[int, float]]:
    out = []
    for idp in records:
        edp: Any = idp.val_edp if split == "val" else (idp.train_summary or idp.train_edp)
        if edp is not None and edp.loss is not None and math.isfinite(edp.loss):
            out.append((idp.epoch, edp.loss))
    return out


def _svg(run: RenderedRun, width: int = 420, height: int = 180) -> str:
    records = run.epoch_records()
    series = {"train": _series(records, "train"), "val": _series(records, "val")}
    points = [p for s in series.values() for p in s]
    if not points:
        return ""
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1 = min(xs), max(max(xs), min(xs) + 1)
    y0, y1 = min(ys), max(max(ys), min(ys) + 1e-12)
    pad = 30

    def at(x: float, y: float) -> str:
        px = pad + (x - x0) / (x1 - x0) * (width - 2 * pad)
        py = height - pad - (y - y0) / (y1 - y0) * (height - 2 * pad)
        return f"{px:.1f},{py:.1f}"

    colors = {"train": "#1f77b4", "val": "#d62728"}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'role="img" aria-label="loss per epoch">']
    for name, pts in series.items():
        if pts:
            path = " ".join(at(x, y) for x, y in pts)
            parts.append(f'<polyline fill="none" stroke="{colors[name]}" stroke-width="2" '
                         f'points="{path}"><title>{name} loss</title></polyline>')
            parts.append(f'<text x="{width - pad}" y="{14 + 14 * list(series).index(name)}" '
                         f'fill="{colors[name]}" font-size="11" text-anchor="end">{name}</text>')
    parts.append(f'<text x="{pad}" y="{height - 8}" font-size="10">epoch {x0}…{x1}, '
                 f'loss {y0:.3g}…{y1:.3g}</text></svg>')
    return "".join(parts)


def render_html(run: RenderedRun) -> str:
    meta = "".join(f"<tr><th style='text-align:right'>{html.escape(k)}</th>"
                   f"<td>{html.escape(v)}</td></tr>" for k, v in _describe(run))
    head = "".join(f"<th>{c}</th>" for c in _COLUMNS)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in r) + "</tr>"
                   for r in epoch_rows(run))
    return (f"<div><table>{meta}</table>{_svg(run)}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>")
