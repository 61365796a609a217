"""idps.csv's list rendering (csv.writer) is byte for byte the csv.DictWriter rendering
it replaced, for every kind of cell; the oracle below is that code, copied as it was."""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

import numpy as np

from nnx._foundation.records import (
    EDP_FIELDS,
    MonitorRecord,
    NNEvaluationDataPoint,
    NNIterationDataPoint,
    deferred_record,
)
from nnx._journal.history_csv import IdpsCsv, read_idps_csv, render_idps_csv

# -- the oracle: history_csv's _row / _columns / _lines before the list rendering ---------

_BASE = ("epoch", "iter_idx", "batch_idx", "update_count", "lr")
_SPLITS = (("train", "train_edp"), ("val", "val_edp"), ("train_summary", "train_summary"))
_TASK = ("kind", "count", "status")


def _old_row(idp: NNIterationDataPoint) -> dict[str, Any]:
    row: dict[str, Any] = {
        "epoch": idp.epoch, "iter_idx": idp.iter_idx, "batch_idx": idp.batch_idx,
        "update_count": idp.update_count, "lr": idp.lr,
    }
    for prefix, attr in _SPLITS:
        edp = getattr(idp, attr)
        if edp is None:
            continue
        for name in (*EDP_FIELDS, *_TASK):
            value = getattr(edp, name)
            if value is not None:
                row[f"{prefix}_{name}"] = value
        for key, value in edp.extra.items():
            row[f"{prefix}_extra.{key}"] = value
        for key, value in edp.metrics.items():
            row[f"{prefix}_metrics.{key}"] = value
    if idp.selection is not None:
        row["selection"] = json.dumps(idp.selection.state(), sort_keys=True, allow_nan=True)
    return row


def _old_columns(rows: list[dict[str, Any]]) -> list[str]:
    seen: set[str] = set()
    for row in rows:
        seen.update(row)
    fixed = [c for c in _BASE if c in seen or c in ("epoch", "iter_idx", "batch_idx")]
    ordered = []
    for prefix, _ in _SPLITS:
        for name in (*EDP_FIELDS, *_TASK):
            if f"{prefix}_{name}" in seen:
                ordered.append(f"{prefix}_{name}")
        for kind in ("extra", "metrics"):
            ordered += sorted(c for c in seen if c.startswith(f"{prefix}_{kind}."))
    return fixed + ordered + (["selection"] if "selection" in seen else [])


def oracle(idps: list[NNIterationDataPoint]) -> str:
    rows = [_old_row(idp) for idp in idps]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=_old_columns(rows), lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else (repr(v) if isinstance(v, float) else v))
                         for k, v in row.items()})
    return out.getvalue()


# -- records covering every cell kind ---------------------------------------------------------


class _Scores:
    def fields(self) -> dict[str, Any]:
        return {"error": 0.25, "accuracy": 0.75, "f1": 1 / 3, "recall": 0.5,
                "precision": math.nan, "count": 7}


def _selection(value: float | None, improved: bool) -> MonitorRecord:
    return MonitorRecord(metric='acc,"top1"', split="val", direction="max", min_delta=0.0,
                         value=value, status="ok" if value is not None else "missing",
                         improved=improved)


def history() -> list[NNIterationDataPoint]:
    nan, inf = math.nan, math.inf
    return [
        NNIterationDataPoint(epoch=0, iter_idx=0, batch_idx=0),  # no edp, no lr, no count
        NNIterationDataPoint(
            epoch=0, iter_idx=1, batch_idx=1, lr=1e-3, update_count=1,
            train_edp=NNEvaluationDataPoint(loss=0.1, error=nan, accuracy=-inf, f1=inf,
                                            extra={"grad,norm": 2.5, "b": -0.0},
                                            metrics={"nll": 1e-300}),
            val_edp=NNEvaluationDataPoint(loss=nan, metrics={"top5": 0.2}, kind="categorical",
                                          count=3, status="ok"),
            train_summary=NNEvaluationDataPoint(loss=1.5, extra={'q"uote': 1.0}),
            selection=_selection(0.5, True)),
        NNIterationDataPoint(
            epoch=1, iter_idx=2, batch_idx=0, lr=np.float64(0.1), update_count=None,
            train_edp=deferred_record(_Scores(), loss=0.3, kind="categorical", status="ok"),
            val_edp=NNEvaluationDataPoint(kind="regression", count=0, status="empty"),
            selection=_selection(None, False)),
        NNIterationDataPoint(
            epoch=1, iter_idx=3, batch_idx=1, lr=2, update_count=np.int64(5),
            train_edp=deferred_record(_Scores(), loss=None),
            train_summary=NNEvaluationDataPoint(loss=1 / 7, metrics={"nll": nan})),
    ]


def test_the_full_render_is_the_dictwriter_render() -> None:
    idps = history()
    assert render_idps_csv(idps) == oracle(idps)
    for n in range(len(idps) + 1):
        assert render_idps_csv(idps[:n]) == oracle(idps[:n])
    text = render_idps_csv(idps)
    assert '"{""' in text and "np.float64(0.1)" in text and ",nan," in text


def test_the_incremental_render_is_the_dictwriter_render() -> None:
    idps = history()
    for start in range(len(idps) + 1):  # any split into two commits
        renderer = IdpsCsv()
        renderer.render(idps[:start])
        assert renderer.render(idps) == oracle(idps)
    renderer, grown = IdpsCsv(), []
    for idp in idps:  # one record per commit, columns appearing on the way
        grown.append(idp)
        assert renderer.render(grown) == oracle(grown)


def test_a_fit_history_renders_and_reads_back_as_before() -> None:
    idps = [NNIterationDataPoint(
        epoch=e, iter_idx=10 * e + b, batch_idx=b, lr=0.1 / (b + 1), update_count=10 * e + b,
        train_edp=NNEvaluationDataPoint(loss=1 / (b + 3), error=b / 11, accuracy=1 - b / 11,
                                        f1=b / 13, recall=b / 17, precision=b / 19,
                                        kind="categorical", count=256, status="ok"))
        for e in range(3) for b in range(10)]
    text = render_idps_csv(idps)
    assert text == oracle(idps)
    assert read_idps_csv(text) == idps
