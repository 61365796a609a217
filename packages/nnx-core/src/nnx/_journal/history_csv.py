"""idps.csv: the per-iteration history as one flat table (spec §4, §6.2).

Columns are fixed for the iteration fields, then ``<split>_<field>`` for each
evaluation record (``train``, ``val``, ``train_summary``), with
``<split>_extra.<key>`` / ``<split>_metrics.<key>`` for open-ended values and
``selection`` as a JSON cell. Only columns some record uses are written, so a
run that uses no task, metric or monitor keeps the legacy columns. A CSV
cannot tell NaN from absent: NaN cells read back as absent values.
"""

from __future__ import annotations

import csv
import io
import json
import math
import operator
from collections.abc import Iterable, Sequence
from typing import Any

from nnx._foundation.records import EDP_FIELDS, NNEvaluationDataPoint, NNIterationDataPoint

__all__ = ["IdpsCsv", "read_idps_csv", "render_idps_csv"]

_BASE = ("epoch", "iter_idx", "batch_idx", "update_count", "lr")
_SPLITS = (("train", "train_edp"), ("val", "val_edp"), ("train_summary", "train_summary"))
_TASK = ("kind", "count", "status")


#: Per split: the edp's scalar and task fields, read in one call, and their columns.
_FIELDS = operator.attrgetter(*EDP_FIELDS, *_TASK)
_NAMED = {prefix: tuple(f"{prefix}_{name}" for name in (*EDP_FIELDS, *_TASK))
          for prefix, _ in _SPLITS}


def _plain(value: Any) -> Any:
    """``value``, or ``repr(value)`` for a float subclass (``np.float64``): the file
    holds its repr, which csv.writer does not write for every subclass."""
    if type(value) is float or not isinstance(value, float):
        return value
    return repr(value)


def _row(idp: NNIterationDataPoint) -> dict[str, Any]:
    """The record's cells by column, as ``csv.writer`` writes them (None empty, floats
    by ``repr``); only the set fields have a key, so the keys say which columns it uses."""
    row: dict[str, Any] = {
        "epoch": _plain(idp.epoch), "iter_idx": _plain(idp.iter_idx),
        "batch_idx": _plain(idp.batch_idx), "update_count": _plain(idp.update_count),
        "lr": _plain(idp.lr),
    }
    # An edp's numbers are plain floats already (NNEvaluationDataPoint converts them).
    for prefix, attr in _SPLITS:
        edp: NNEvaluationDataPoint | None = getattr(idp, attr)
        if edp is None:
            continue
        for column, value in zip(_NAMED[prefix], _FIELDS(edp), strict=True):
            if value is not None:
                row[column] = value
        for key, value in edp.extra.items():
            row[f"{prefix}_extra.{key}"] = value
        for key, value in edp.metrics.items():
            row[f"{prefix}_metrics.{key}"] = value
    if idp.selection is not None:
        row["selection"] = json.dumps(idp.selection.state(), sort_keys=True, allow_nan=True)
    return row


def _columns(rows: Sequence[dict[str, Any]]) -> list[str]:
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


def _lines(rows: Iterable[dict[str, Any]], columns: list[str], *, header: bool) -> str:
    # Lists in column order through csv.writer: the same text csv.DictWriter wrote (its
    # restval "" for a missing cell), without its per-row key check. csv.writer itself
    # writes None as "" and a float by repr().
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    if header:
        writer.writerow(columns)
    writer.writerows([row.get(column, "") for column in columns] for row in rows)
    return out.getvalue()


def render_idps_csv(idps: Iterable[NNIterationDataPoint]) -> str:
    rows = [_row(idp) for idp in idps]
    return _lines(rows, _columns(rows), header=True)


class IdpsCsv:
    """:func:`render_idps_csv` of a history that grows between calls.

    A record that is still the same object as at the last call keeps its rendered
    line, so each epoch's commit renders only that epoch's records; the whole file
    is rendered again only when a record appears with a column the file has not
    had, or an earlier record was removed or replaced (a rollback).
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._records: list[NNIterationDataPoint] = []
        self._rows: list[dict[str, Any]] = []
        self._columns: list[str] = _columns([])
        self._known: set[str] = set(self._columns)
        self._text = ""

    def render(self, idps: Sequence[NNIterationDataPoint]) -> str:
        done = len(self._records)
        if len(idps) < done or not all(map(operator.is_, idps, self._records)):
            self._reset()  # an earlier record changed: start over
            done = 0
        new = list(idps[done:])
        rows = [_row(idp) for idp in new]
        self._records += new
        self._rows += rows
        known = self._known
        columns = _columns(self._rows) if any(not known.issuperset(row) for row in rows
                                               ) else self._columns
        if columns != self._columns or not self._text:
            self._columns, self._known = columns, set(columns)
            self._text = _lines(self._rows, columns, header=True)
        else:
            self._text += _lines(rows, columns, header=False)
        return self._text


def _cell(text: str) -> float | None:
    if text == "":
        return None
    value = float(text)
    return None if math.isnan(value) else value


def _edp(row: dict[str, str], prefix: str) -> NNEvaluationDataPoint | None:
    fields: dict[str, Any] = {}
    extra: dict[str, float] = {}
    metrics: dict[str, float] = {}
    for column, text in row.items():
        if not column.startswith(prefix + "_") or text == "":
            continue
        name = column[len(prefix) + 1:]
        if prefix == "train" and name.startswith("summary_"):
            continue  # train_summary_* belongs to the summary record
        if name in ("kind", "status"):
            fields[name] = text
        elif name == "count":
            fields[name] = int(float(text))
        elif name in EDP_FIELDS:
            fields[name] = _cell(text)
        elif name.startswith("extra.") and (v := _cell(text)) is not None:
            extra[name[6:]] = v
        elif name.startswith("metrics.") and (v := _cell(text)) is not None:
            metrics[name[8:]] = v
    present = {k: v for k, v in fields.items() if v is not None}
    if not present and not extra and not metrics:
        return None  # a record whose values were all NaN reads back as no record
    return NNEvaluationDataPoint(**present, extra=extra, metrics=metrics)


def read_idps_csv(text: str) -> list[NNIterationDataPoint]:
    out = []
    for row in csv.DictReader(io.StringIO(text)):
        update = _cell(row.get("update_count") or "")
        selection = row.get("selection") or None
        out.append(NNIterationDataPoint(
            epoch=int(row["epoch"]), iter_idx=int(row["iter_idx"]),
            batch_idx=int(row["batch_idx"]),
            update_count=None if update is None else int(update),
            lr=_cell(row.get("lr") or ""),
            train_edp=_edp(row, "train"), val_edp=_edp(row, "val"),
            train_summary=_edp(row, "train_summary"),
            selection=None if selection is None else json.loads(selection),
        ))
    return out
