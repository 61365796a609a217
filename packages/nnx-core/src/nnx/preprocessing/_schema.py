"""Reading a declared column schema out of DataFrames, tensors, arrays and rows (spec §13.4).

Everything here returns float64 NumPy arrays and raises :class:`PreprocessingError`
before any statistic is computed or any model sees the data. pandas is never
imported here: a value can only be a DataFrame or Series if pandas is already
loaded, so ``sys.modules`` is asked instead.
"""

from __future__ import annotations

import numbers
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

__all__ = [
    "ColumnLabel",
    "PreprocessingError",
    "check_labels",
    "check_positions",
    "data_matrix",
    "is_frame",
    "training_matrix",
]

ColumnLabel = str | int


class PreprocessingError(ValueError):
    """A preprocessing schema, statistic or saved state was refused."""


def _pandas_type(value: Any, name: str) -> bool:
    pd = sys.modules.get("pandas")
    return pd is not None and isinstance(value, getattr(pd, name))


def is_frame(value: Any) -> bool:
    return _pandas_type(value, "DataFrame")


def check_labels(field: str, columns: Any) -> tuple[ColumnLabel, ...]:
    """Column labels: a non-empty sequence of unique str / int labels (JSON keeps both)."""
    if isinstance(columns, (str, bytes)) or not isinstance(columns, Sequence | np.ndarray):
        raise PreprocessingError(f"{field} must be a list of column labels; got {columns!r}")
    labels = tuple(c.item() if isinstance(c, np.generic) else c for c in columns)
    if not labels:
        raise PreprocessingError(f"{field} must name at least one column")
    for i, label in enumerate(labels):
        if isinstance(label, bool) or not isinstance(label, (str, int)):
            raise PreprocessingError(f"{field}[{i}] must be a str or int label; got {label!r}")
    if len(set(labels)) != len(labels):
        raise PreprocessingError(f"{field} must not repeat a column; got {list(labels)!r}")
    return labels


def check_positions(field: str, rows: Any) -> tuple[int, ...]:
    """Integer row positions: 1-D, non-empty, non-negative, no repeats."""
    if hasattr(rows, "to_numpy") and not isinstance(rows, torch.Tensor):  # a pandas Index
        rows = rows.to_numpy()
    if isinstance(rows, torch.Tensor):
        if rows.dtype.is_floating_point or rows.dtype.is_complex or rows.dtype == torch.bool:
            raise PreprocessingError(f"{field} must hold integer positions; got {rows.dtype}")
        rows = rows.detach().cpu().reshape(-1).tolist()
    elif isinstance(rows, np.ndarray):
        if rows.dtype.kind not in "iu":
            raise PreprocessingError(f"{field} must hold integer positions; got {rows.dtype}")
        rows = rows.reshape(-1).tolist()
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence | range):
        raise PreprocessingError(f"{field} must be a sequence of integer row positions; "
                                 f"got {type(rows).__name__}")
    positions = tuple(rows)
    for p in positions:
        if isinstance(p, bool) or not isinstance(p, numbers.Integral) or p < 0:
            raise PreprocessingError(f"{field} must hold non-negative integer positions; "
                                     f"got {p!r}")
    if not positions:
        raise PreprocessingError(f"{field} is empty; a fit needs at least one training row")
    out = tuple(int(p) for p in positions)
    if len(set(out)) != len(out):
        raise PreprocessingError(f"{field} repeats a position; a membership is a set of rows")
    return out


def _check_finite(values: np.ndarray, columns: Sequence[ColumnLabel], rows: Any) -> None:
    bad = ~np.isfinite(values)
    if bool(bad.any()):
        r, c = (int(v) for v in np.argwhere(bad)[0])
        row = rows[r] if rows is not None else r
        raise PreprocessingError(f"column {columns[c]!r} holds {int(bad.sum())} missing or "
                                 f"non-finite value(s) (first at row {row!r})")


def _label_positions(index: Any, columns: Sequence[ColumnLabel], what: str, *,
                     ordered: bool = True) -> list[int]:
    """Where each fitted column sits in ``index``: present once (and, for data the schema
    is applied to, in the fitted order; a fit declares the order instead)."""
    missing = [c for c in columns if c not in index]
    if missing:
        raise PreprocessingError(f"the {what} lacks the fitted column(s) {missing!r}")
    positions = []
    for c in columns:
        where = index.get_loc(c)
        if not isinstance(where, int):
            raise PreprocessingError(f"column label {c!r} appears more than once")
        positions.append(where)
    if ordered and positions != sorted(positions):
        order = [c for c in index if c in set(columns)]
        raise PreprocessingError(f"the {what} holds the fitted columns in the order "
                                 f"{order!r}; the schema's order is {list(columns)!r}")
    return positions


def _frame_matrix(df: Any, columns: Sequence[ColumnLabel], rows: Any = None) -> np.ndarray:
    pd = sys.modules["pandas"]
    where = _label_positions(df.columns, columns, "DataFrame", ordered=rows is None)
    # iloc on the positions first: only the asked rows of the asked columns are read.
    part = df.iloc[:, where] if rows is None else df.iloc[list(rows), where]
    for c, dtype in zip(columns, part.dtypes, strict=True):
        if not pd.api.types.is_numeric_dtype(dtype) or getattr(dtype, "kind", "") == "c":
            raise PreprocessingError(f"column {c!r} must be numeric; it has dtype {dtype}")
    values: np.ndarray = part.to_numpy(dtype="float64", na_value=np.nan)
    _check_finite(values, columns, list(part.index))
    return values


def _series_row(row: Any, columns: Sequence[ColumnLabel]) -> np.ndarray:
    """A pandas Series row, checked by name like a one-row DataFrame.

    A row of a mixed DataFrame has object dtype, so its values are checked one by one.
    """
    values = row.iloc[_label_positions(row.index, columns, "row")].tolist()
    for c, v in zip(columns, values, strict=True):
        if not isinstance(v, numbers.Real):
            raise PreprocessingError(f"column {c!r} must be numeric; the row holds {v!r}")
    out = np.asarray(values, dtype=np.float64)
    _check_finite(out[None, :], columns, [row.name])
    return out


def _numeric_array(value: Any) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        if value.dtype.is_complex:
            raise PreprocessingError(f"values must be real numbers; got a {value.dtype} tensor")
        return value.detach().cpu().to(torch.float64).numpy()
    if not isinstance(value, np.ndarray):
        if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
            raise PreprocessingError(f"cannot read rows from a {type(value).__name__}; pass a "
                                     "DataFrame, a tensor, an array or a 1-D row")
        value = np.asarray(value, dtype=object)  # checked item by item below
    elif value.dtype.kind not in "biuf" and value.dtype != object:
        raise PreprocessingError(f"values must be real numbers; got an array of {value.dtype}")
    if value.dtype == object:
        for item in value.reshape(-1):
            if not isinstance(item, numbers.Real):
                raise PreprocessingError(f"values must be real numbers; got {item!r}")
    return np.asarray(value, dtype=np.float64)


def data_matrix(data: Any, columns: Sequence[ColumnLabel]) -> tuple[np.ndarray, bool]:
    """``data`` as a float64 matrix over ``columns`` and whether it was one row.

    DataFrames and Series are read by name; tensors, arrays and other rows by
    position, at the schema's width.
    """
    if is_frame(data):
        return _frame_matrix(data, columns), False
    if _pandas_type(data, "Series"):
        return _series_row(data, columns)[None, :], True
    values = _numeric_array(data)
    if values.ndim not in (1, 2):
        raise PreprocessingError(f"expected one row (1-D) or a batch of rows (2-D); "
                                 f"got {values.ndim}-D data")
    single = values.ndim == 1
    matrix = values[None, :] if single else values
    if matrix.shape[1] != len(columns):
        raise PreprocessingError(f"expected {len(columns)} columns {list(columns)!r}; "
                                 f"got width {matrix.shape[1]}")
    _check_finite(matrix, columns, None)
    return matrix, single


def training_matrix(source: Any, rows: tuple[int, ...], columns: Any
                    ) -> tuple[np.ndarray, tuple[ColumnLabel, ...]]:
    """The training ``rows`` of ``source`` as float64, reading no other row.

    DataFrames are read through ``iloc`` (``columns`` required), tensors and
    arrays by index, and any other row-indexable source item by item.
    """
    labels = None if columns is None else check_labels("columns", columns)
    size = len(source) if hasattr(source, "__len__") else None
    if size is not None and max(rows) >= size:
        raise PreprocessingError(f"rows holds position {max(rows)} but the source has "
                                 f"{size} rows")
    if is_frame(source):
        if labels is None:
            raise PreprocessingError("columns is required to fit on a DataFrame (the schema "
                                     "names which columns are features)")
        return _frame_matrix(source, labels, rows), labels
    if isinstance(source, (torch.Tensor, np.ndarray)):
        if source.ndim != 2:
            raise PreprocessingError(f"a tensor or array source must be 2-D (rows, columns); "
                                     f"got {source.ndim}-D")
        index = list(rows)
        matrix = _numeric_array(source[torch.tensor(index) if isinstance(source, torch.Tensor)
                                       else np.asarray(index)])
    elif hasattr(source, "__getitem__"):
        items = [source[i] for i in rows]
        if labels is not None and any(_pandas_type(item, "Series") for item in items):
            matrix = np.stack([_series_row(item, labels) if _pandas_type(item, "Series")
                               else _one_row(item, len(labels)) for item in items])
        else:
            width = None if labels is None else len(labels)
            first = _one_row(items[0], width)
            matrix = np.stack([first, *(_one_row(item, len(first)) for item in items[1:])])
    else:
        raise PreprocessingError(f"cannot read rows from a {type(source).__name__}; pass a "
                                 "DataFrame, a tensor, an array or a row-indexable source")
    labels = tuple(range(matrix.shape[1])) if labels is None else labels
    if matrix.shape[1] != len(labels):
        raise PreprocessingError(f"columns names {len(labels)} columns but the source rows "
                                 f"have width {matrix.shape[1]}")
    _check_finite(matrix, labels, list(rows))
    return matrix, labels


def _one_row(item: Any, width: int | None) -> np.ndarray:
    row = _numeric_array(item)
    if row.ndim != 1:
        raise PreprocessingError(f"each source item must be one 1-D row; got {row.ndim}-D")
    if width is not None and len(row) != width:
        raise PreprocessingError(f"source rows must all have width {width}; got {len(row)}")
    return row
