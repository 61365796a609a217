"""idps.csv: the per-iteration history as one flat table (spec §4, §6.2).

Columns are fixed for the iteration fields, then ``<split>_<field>`` for each
evaluation record (``train``, ``val``, ``train_summary``), with
``<split>_extra.<key>`` / ``<split>_metrics.<key>`` for open-ended values and
``selection`` as a JSON cell. Only columns some record uses are written, so a
run that uses no task, metric or monitor keeps the legacy columns. A CSV
cannot tell NaN from absent: NaN cells read back as absent values.

The file grows by appending: each commit adds that epoch's lines, flushed,
after the lines already there (:meth:`IdpsCsv.write`); a new column or an
earlier record changed replaces the whole file atomically instead. A process
killed inside an append leaves the committed lines whole and a torn last line
past them; readers drop a last line without its newline, and LAST (the commit
marker) already hides records newer than its epoch. An append that fails, or
is interrupted, is cut back off, so the file is the previous one again.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from nnx._foundation.atomic import append_at, atomic_write_text
from nnx._foundation.records import EDP_FIELDS, NNEvaluationDataPoint, NNIterationDataPoint

__all__ = ["IdpsCsv", "committed_text", "read_idps_csv", "render_idps_csv"]

_BASE = ("epoch", "iter_idx", "batch_idx", "update_count", "lr")
_SPLITS = (("train", "train_edp"), ("val", "val_edp"), ("train_summary", "train_summary"))
_TASK = ("kind", "count", "status")


def _row(idp: NNIterationDataPoint) -> dict[str, Any]:
    row: dict[str, Any] = {
        "epoch": idp.epoch, "iter_idx": idp.iter_idx, "batch_idx": idp.batch_idx,
        "update_count": idp.update_count, "lr": idp.lr,
    }
    for prefix, attr in _SPLITS:
        edp: NNEvaluationDataPoint | None = getattr(idp, attr)
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
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=columns, lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({k: ("" if v is None else (repr(v) if isinstance(v, float) else v))
                         for k, v in row.items()})
    return out.getvalue()


def render_idps_csv(idps: Iterable[NNIterationDataPoint]) -> str:
    rows = [_row(idp) for idp in idps]
    return _lines(rows, _columns(rows), header=True)


class IdpsCsv:
    """:func:`render_idps_csv` of a history that grows between calls.

    Records that are still the ones of the last call keep their rendered lines, so
    each epoch's commit renders only that epoch's records; the whole file is
    rendered again only when a record appears with a column the file has not had,
    or an earlier record was removed or replaced by a different one (a rollback).
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._records: list[NNIterationDataPoint] = []
        self._rows: list[dict[str, Any]] = []
        self._columns: list[str] = _columns([])
        self._chunks: list[str] = []  # the file's text, one chunk per call
        self._size: int | None = None  # bytes on disk after the last write; None: unknown

    def _advance(self, idps: Sequence[NNIterationDataPoint]) -> str | None:
        """Take ``idps`` in; the text to append, or None when the whole text changed."""
        done = len(self._records)
        # A C-level comparison (identity first, then value): a record replaced by an
        # equal one renders the same line, so only a real change starts over.
        if len(idps) < done or list(idps[:done]) != self._records:
            self._reset()  # an earlier record changed: start over
            done = 0
        new = list(idps[done:])
        rows = [_row(idp) for idp in new]
        self._records += new
        self._rows += rows
        known = set(self._columns)
        if self._chunks and all(c in known for row in rows for c in row):
            tail = _lines(rows, self._columns, header=False)
            self._chunks.append(tail)
            return tail
        self._columns = _columns(self._rows)
        self._chunks = [_lines(self._rows, self._columns, header=True)]
        return None

    def render(self, idps: Sequence[NNIterationDataPoint]) -> str:
        self._advance(idps)
        return "".join(self._chunks)

    def write(self, path: Path, idps: Sequence[NNIterationDataPoint]) -> None:
        """Bring ``path`` up to ``idps``: append the new lines when the file is still
        what the last write left, else replace it whole with the atomic writer."""
        size = self._size
        tail = self._advance(idps)
        try:
            if tail is not None and size is not None and _size_of(path) == size:
                self._size = _append(path, size, tail.encode("utf-8"))
            else:
                data = "".join(self._chunks)
                atomic_write_text(path, data)
                self._size = len(data.encode("utf-8"))
        except BaseException:
            self._reset()  # the file is the previous one: the next write replaces it whole
            raise


def _size_of(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _append(path: Path, offset: int, data: bytes) -> int:
    """``data`` after the first ``offset`` bytes, flushed (as the atomic writer flushes);
    on any failure, a Ctrl-C included, the file is cut back to ``offset``."""
    try:
        return append_at(path, offset, data)
    except BaseException:
        with contextlib.suppress(OSError):
            os.truncate(path, offset)
        raise


def committed_text(text: str) -> tuple[str, bool]:
    """(the text up to its last newline, whether a torn last line was dropped). Every
    line is written with its newline, so a last line without one is an append a killed
    process did not finish."""
    if not text or text.endswith("\n"):
        return text, False
    return text[:text.rfind("\n") + 1], True


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
    """The records of an idps.csv text; a torn last line (see :func:`committed_text`)
    is not one."""
    out = []
    for row in csv.DictReader(io.StringIO(committed_text(text)[0])):
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
