"""Standardizer: train-only float64 statistics with a declared schema (spec §13.4).

The statistics are computed with ``math.fsum`` (a correctly rounded sum), so
they depend only on the set of training values, never on their order. The
state is primitive JSON (``nnx.preprocessing/1``): Python writes floats as
their shortest round-trip repr, so a reload is float64-exact.
"""

from __future__ import annotations

import json
import math
import numbers
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from torch import Tensor

from nnx._foundation.atomic import atomic_write_text
from nnx._foundation.bounded import load_json
from nnx._foundation.hashing import canonical_bytes, plain, sha256_hex
from nnx.preprocessing._schema import (
    ColumnLabel,
    PreprocessingError,
    check_labels,
    check_positions,
    data_matrix,
    training_matrix,
)

__all__ = ["FORMAT", "Standardizer"]

#: The format version stored in (and hashed with) every state.
FORMAT = "nnx.preprocessing/1"
_KIND = "standardizer"
_KEYS = frozenset({"format", "kind", "columns", "mean", "scale", "dtype", "n_rows",
                   "membership"})
_DTYPES = {str(d).removeprefix("torch."): d
           for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64)}
_IDENTITIES = ("declared", "digest", "unknown")
#: Columns whose largest magnitude reaches 2**_ROOM are fitted scaled down to below it.
_ROOM = 960


class Standardizer:
    """``(x - mean) / scale`` per column, with statistics fitted on training rows only.

    Build one with :meth:`fit` or reload one with :meth:`load` / :meth:`from_json`
    / :meth:`from_state`. It is immutable; ``transform`` (also its call) returns
    a ``dtype`` tensor, one row for one row in.
    """

    __slots__ = ("_columns", "_dtype", "_mean", "_membership", "_n_rows", "_scale", "_state")

    _columns: tuple[ColumnLabel, ...]
    _dtype: torch.dtype
    _mean: np.ndarray
    _membership: dict[str, Any]
    _n_rows: int
    _scale: np.ndarray
    _state: dict[str, Any]

    def __init__(self, columns: Any, mean: Any, scale: Any, *, n_rows: int,
                 membership: Any, dtype: torch.dtype = torch.float32) -> None:
        name = _dtype_name(dtype)
        state = {"format": FORMAT, "kind": _KIND, "columns": columns, "mean": mean,
                 "scale": scale, "dtype": name, "n_rows": n_rows, "membership": membership}
        self._load(_checked_state(state))

    def _load(self, state: dict[str, Any]) -> None:
        object.__setattr__(self, "_state", state)
        object.__setattr__(self, "_columns", tuple(state["columns"]))
        object.__setattr__(self, "_mean", np.asarray(state["mean"], dtype=np.float64))
        object.__setattr__(self, "_scale", np.asarray(state["scale"], dtype=np.float64))
        object.__setattr__(self, "_dtype", _DTYPES[state["dtype"]])
        object.__setattr__(self, "_n_rows", state["n_rows"])
        object.__setattr__(self, "_membership", state["membership"])

    @classmethod
    def fit(cls, source: Any, *, rows: Any, columns: Any = None,
            dtype: torch.dtype = torch.float32, membership: Any = None) -> Standardizer:
        """Fit the float64 population mean and standard deviation on ``rows`` of ``source``.

        ``rows`` are the training rows' integer positions; no other row is read.
        ``columns`` names the features (required for a DataFrame; for tensors,
        arrays and row-indexables it names their columns, default ``0..w-1``).
        A constant column keeps its value as the mean and gets scale 1.
        ``membership`` names the training rows (a SplitManifest, an identity
        reference or a declared name); the default is a digest of the positions.
        """
        name = _dtype_name(dtype)
        positions = check_positions("rows", rows)
        named = _membership(membership, positions)
        matrix, labels = training_matrix(source, positions, columns)
        mean, scale = _statistics(matrix, labels)
        return cls(labels, mean, scale, n_rows=len(positions), membership=named,
                   dtype=_DTYPES[name])

    # -- the schema and statistics -----------------------------------------------------
    @property
    def columns(self) -> list[ColumnLabel]:
        return list(self._columns)

    @property
    def mean(self) -> tuple[float, ...]:
        return tuple(self._state["mean"])

    @property
    def scale(self) -> tuple[float, ...]:
        return tuple(self._state["scale"])

    @property
    def dtype(self) -> torch.dtype:
        return self._dtype

    @property
    def n_rows(self) -> int:
        """How many training rows the statistics were fitted on."""
        return int(self._n_rows)

    @property
    def membership(self) -> dict[str, Any]:
        """The fit membership's identity: ``{"identity": kind, "value": ...}``."""
        return dict(self._membership)

    # -- applying it -------------------------------------------------------------------
    def transform(self, data: Any) -> Tensor:
        """Standardize a DataFrame, a 2-D tensor / array, or one row; ``dtype`` out.

        Values are read in float64 and refused (PreprocessingError) when a fitted
        column is missing or out of order, the width differs, or a value is
        non-numeric or non-finite. One row gives exactly its batch result.
        """
        matrix, single = data_matrix(data, self._columns)
        with np.errstate(over="ignore"):
            centred = matrix - self._mean
            values = centred / self._scale
            wide = ~np.isfinite(centred)
            if wide.any():
                # x - mean can pass the float64 maximum (values near it, of both signs)
                # while the standardized value is finite: halving such values is exact.
                halves = (matrix / 2 - self._mean / 2) / self._scale * 2
                values = np.where(wide, halves, values)
        out = torch.from_numpy(values).to(self._dtype)
        if not bool(torch.isfinite(out).all()):
            raise PreprocessingError(f"standardized values overflow {self._dtype}")
        return out[0] if single else out

    __call__ = transform

    # -- identity and serialization --------------------------------------------------
    def state(self) -> dict[str, Any]:
        """The primitive JSON state (``nnx.preprocessing/1``); a fresh copy."""
        result: dict[str, Any] = plain(self._state)
        return result

    @classmethod
    def from_state(cls, state: Any) -> Standardizer:
        """Rebuild from :meth:`state`; bad lengths, non-finite values and non-positive
        scales raise PreprocessingError."""
        obj = cls.__new__(cls)
        obj._load(_checked_state(state))
        return obj

    def digest(self) -> str:
        """SHA-256 of the canonical state: statistics, schema and fit membership."""
        return sha256_hex(canonical_bytes(self._state))

    def to_json(self) -> str:
        return json.dumps(self._state, sort_keys=True, indent=2, allow_nan=False) + "\n"

    @classmethod
    def from_json(cls, text: str | bytes) -> Standardizer:
        try:
            document = load_json(data=text, where="standardizer JSON",
                                 parse_constant=_no_constant)
        except ValueError as exc:
            raise PreprocessingError(str(exc)) from None
        return cls.from_state(document)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write :meth:`to_json` atomically: a reader sees the old file or the new one."""
        atomic_write_text(path, self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Standardizer:
        try:
            document = load_json(path, parse_constant=_no_constant)
        except ValueError as exc:
            raise PreprocessingError(str(exc)) from None
        return cls.from_state(document)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Standardizer):
            return NotImplemented
        return canonical_bytes(self._state) == canonical_bytes(other._state)

    def __hash__(self) -> int:
        return hash(self.digest())

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        return (Standardizer.from_state, (self.state(),))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Standardizer is immutable; cannot set {name!r}")

    def __repr__(self) -> str:
        return (f"Standardizer(columns={self.columns!r}, dtype={self._state['dtype']}, "
                f"n_rows={self._n_rows}, digest={self.digest()[:12]}...)")


def _statistics(matrix: np.ndarray, labels: tuple[ColumnLabel, ...]
                ) -> tuple[list[float], list[float]]:
    """Population mean and standard deviation per column, float64, order-independent.

    A column whose values reach 2**_ROOM is scaled down by a power of two first (exact,
    but for bits below 2**-1010 that no float64 sum of such values can hold), so finite
    inputs near the float64 maximum give finite statistics instead of an overflowing sum
    or deviation; other columns are computed unscaled, exactly as before.
    """
    means: list[float] = []
    scales: list[float] = []
    n = matrix.shape[0]
    for j, label in enumerate(labels):
        column = matrix[:, j]
        low, high = float(column.min()), float(column.max())
        if low == high:  # constant: its exact value, never a rounded average of it
            means.append(low)
            scales.append(1.0)
            continue
        shift = max(0, math.frexp(max(-low, high))[1] - _ROOM)
        scaled = np.ldexp(column, -shift)
        # |scaled| < 2**_ROOM, so neither fsum's partial sums (n < 2**62 rows) nor a
        # deviation can leave float64; the mean of the scaled values is at most their
        # largest magnitude, so scaling it back up stays finite too.
        centre = math.fsum(scaled.tolist()) / n
        mean = math.ldexp(centre, shift)
        try:
            scale = math.ldexp(_spread(scaled - centre, n), shift)
        except OverflowError:  # the deviation is above the float64 maximum after rounding
            scale = math.inf
        if not (math.isfinite(mean) and math.isfinite(scale) and scale > 0):
            raise PreprocessingError(f"column {label!r}: its mean or standard deviation "
                                     f"is not a positive finite float64 ({mean!r}, {scale!r})")
        means.append(mean)
        scales.append(scale)
    return means, scales


def _spread(deviations: np.ndarray, n: int) -> float:
    """sqrt(sum(d**2) / n), with the deviations scaled by a power of two first.

    Scaling by 2**k is exact, so the result is the plain formula's wherever that
    formula stays in range, and squares of 1e300 no longer overflow.
    """
    largest = float(np.abs(deviations).max())
    factor = math.ldexp(1.0, math.frexp(largest)[1])
    scaled = deviations / factor
    return factor * math.sqrt(math.fsum((scaled * scaled).tolist()) / n)


def _membership(value: Any, positions: tuple[int, ...]) -> dict[str, Any]:
    """The fit membership as an identity reference ``{"identity", "value"}``."""
    if value is None:
        rows = canonical_bytes({"format": "nnx.preprocessing/rows", "rows": sorted(positions)})
        return {"identity": "digest", "value": sha256_hex(rows)}
    if isinstance(value, str):
        return {"identity": "declared", "value": value}
    digest = getattr(value, "digest", None)
    if callable(digest) and not isinstance(value, type):  # a SplitManifest
        return {"identity": "digest", "value": digest()}
    state = getattr(value, "state", None)
    if callable(state) and not isinstance(value, type):  # an IdentityRef
        value = state()
    if isinstance(value, Mapping):
        return dict(value)
    raise PreprocessingError(f"membership must be a SplitManifest, an identity reference or "
                             f"a declared name; got {type(value).__name__}")


def _dtype_name(dtype: Any) -> str:
    name = str(dtype).removeprefix("torch.")
    if not isinstance(dtype, torch.dtype) or name not in _DTYPES:
        raise PreprocessingError(f"dtype must be a floating torch.dtype "
                                 f"({', '.join(_DTYPES)}); got {dtype!r}")
    return name


def _checked_state(state: Any) -> dict[str, Any]:
    """A state that passes every rule, as fresh plain data; else PreprocessingError."""
    if not isinstance(state, Mapping):
        raise PreprocessingError(f"a standardizer state is a mapping; got {type(state).__name__}")
    if state.get("format") != FORMAT or state.get("kind") != _KIND:
        raise PreprocessingError(f"not a {FORMAT} standardizer: format "
                                 f"{state.get('format')!r}, kind {state.get('kind')!r}")
    if set(state) != _KEYS:
        raise PreprocessingError(f"a standardizer state has exactly the keys {sorted(_KEYS)}; "
                                 f"got {sorted(map(str, state))}")
    columns = check_labels("columns", state["columns"])
    mean = _floats("mean", state["mean"], len(columns))
    scale = _floats("scale", state["scale"], len(columns))
    for label, s in zip(columns, scale, strict=True):
        if s <= 0:
            raise PreprocessingError(f"scale of column {label!r} must be > 0; got {s!r}")
    if state["dtype"] not in _DTYPES:
        raise PreprocessingError(f"dtype must be one of {', '.join(_DTYPES)}; "
                                 f"got {state['dtype']!r}")
    n_rows = state["n_rows"]
    if isinstance(n_rows, bool) or not isinstance(n_rows, numbers.Integral) or n_rows < 1:
        raise PreprocessingError(f"n_rows must be an int >= 1; got {n_rows!r}")
    return {"format": FORMAT, "kind": _KIND, "columns": list(columns), "mean": mean,
            "scale": scale, "dtype": state["dtype"], "n_rows": int(n_rows),
            "membership": _checked_reference(state["membership"])}


def _floats(field: str, values: Any, width: int) -> list[float]:
    if isinstance(values, np.ndarray):
        values = values.tolist()
    if not isinstance(values, (list, tuple)) or len(values) != width:
        size = len(values) if isinstance(values, (list, tuple)) else type(values).__name__
        raise PreprocessingError(f"{field} must hold one number per column ({width}); "
                                 f"got {size}")
    out: list[float] = []
    for i, v in enumerate(values):
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise PreprocessingError(f"{field}[{i}] must be a number; got {v!r}")
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if not math.isfinite(f):
            raise PreprocessingError(f"{field}[{i}] must be finite; got {v!r}")
        out.append(f)
    return out


def _checked_reference(value: Any) -> dict[str, Any]:
    """An identity reference's JSON shape (the provenance layer above checks its meaning)."""
    if not isinstance(value, Mapping) or set(value) != {"identity", "value"}:
        raise PreprocessingError(f"membership must be {{'identity': ..., 'value': ...}}; "
                                 f"got {value!r}")
    kind, name = value["identity"], value["value"]
    if kind not in _IDENTITIES:
        raise PreprocessingError(f"membership identity must be one of {_IDENTITIES}; "
                                 f"got {kind!r}")
    if (name is not None) if kind == "unknown" else (not isinstance(name, str) or not name):
        raise PreprocessingError(f"a {kind} membership has "
                                 f"{'no value' if kind == 'unknown' else 'a non-empty value'}; "
                                 f"got {name!r}")
    return {"identity": kind, "value": name}


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} in standardizer JSON")
