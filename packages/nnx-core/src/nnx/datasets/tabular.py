"""NNTabularDataset: a pandas DataFrame's columns as an NNDataset.

pandas is imported only when a tabular dataset is built; it ships with the
``tabular`` extra (``pip install "nnx-core[tabular]"``).
"""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import torch
from torch import Tensor

from nnx._foundation.hashing import plain
from nnx._foundation.validation import check_choice
from nnx.datasets._split import PlannedSplit, SplitIndices, check_split_config
from nnx.datasets._tensors import ClassLabel
from nnx.datasets.dataset import NNDataset
from nnx.preprocessing._schema import PreprocessingError, data_matrix
from nnx.preprocessing.standardizer import Standardizer

__all__ = ["TASKS", "NNTabularDataset"]

TASKS = ("classification", "regression")
ColumnLabel = str | int


class NNTabularDataset(NNDataset):
    """Numeric ``feature_cols`` and a ``target_col`` of a DataFrame, split like NNDataset.

    Features become one ``feature_dtype`` tensor and must be numeric and
    finite. A classification target's labels are encoded to ``0..K-1`` in
    sorted order (``classes`` holds the original labels); a regression target
    must be numeric and finite and becomes a ``feature_dtype`` vector. The
    DataFrame is read, never modified, and not kept.

    ``split=`` (a ``nnx.data_splits.SplitManifest``) decides membership instead of
    ``val_proportion`` / ``test_proportion``: the plan is resolved against the ids
    in ``id_col`` (or the row count, for a positional plan) and ``source_identity``
    before any tensor is built, and only its admitted rows are read, so gap rows
    reach no loader. ``split_indices`` are then positions among those rows.

    ``standardize=True`` fits a :class:`~nnx.preprocessing.Standardizer` on the
    training split's rows of the feature columns (after the split, which draws
    exactly as without it) and the loaders serve standardized features;
    ``standardize=<fitted Standardizer>`` applies one without refitting. Either
    way ``standardizer`` holds it (spec §13.4).
    """

    def __init__(
        self,
        df: Any,
        feature_cols: Any,
        target_col: ColumnLabel,
        *,
        val_proportion: float = 0.2,
        test_proportion: float = 0.0,
        batch_sizes: tuple[int | None, int | None, int | None] = (32, None, None),
        seed: int | None = None,
        feature_dtype: torch.dtype = torch.float32,
        task: str = "classification",
        split: PlannedSplit | None = None,
        id_col: ColumnLabel | None = None,
        source_identity: Any = None,
        standardize: bool | Standardizer = False,
    ) -> None:
        owner = type(self).__name__
        config = check_split_config(
            owner,
            val_proportion=val_proportion,
            test_proportion=test_proportion,
            batch_sizes=batch_sizes,
            seed=seed,
        )
        check_choice(f"{owner}.task", task, TASKS)
        if not isinstance(feature_dtype, torch.dtype) or not feature_dtype.is_floating_point:
            raise ValueError(
                f"{owner}.feature_dtype must be a floating torch.dtype; got {feature_dtype!r}"
            )
        features, target = _check_columns(owner, feature_cols, target_col)
        fitted = _check_standardize(owner, standardize, features, feature_dtype)
        pd = _import_pandas()
        if not isinstance(df, pd.DataFrame):
            raise TypeError(f"{owner}.df must be a pandas DataFrame; got {type(df).__name__}")
        for col in (*features, target):
            _column(owner, df, col)  # every column exists before any is converted
        # The plan is resolved before any tensor exists; only its admitted rows are read.
        planned = _planned_rows(owner, df, split, id_col, source_identity, (*features, target))
        if planned is not None:
            df = df.iloc[list(planned[0])]
        self._planned = None if planned is None else planned[1]
        self._split_digest = None if split is None else split.digest()
        self._split_plan = split  # the fit's membership identity when it standardizes
        self._standardizer: Standardizer | None = None
        self._fit_source: tuple[Any, Any] | None = None
        if standardize is False:
            X = torch.stack([_numeric(owner, pd, df, c, feature_dtype) for c in features], dim=1)
        elif fitted is not None:
            self._standardizer = fitted
            X = fitted.transform(df.loc[:, list(features)])
        else:
            # Every row is checked before the split; the fit reads the training rows only.
            raw, _ = data_matrix(df.loc[:, list(features)], features)
            self._fit_source = (df, raw)
            X = torch.zeros((), dtype=feature_dtype).expand(len(raw), len(features))
        if task == "classification":
            Y, classes = _encode_labels(owner, df, target)
        else:
            Y, classes = _numeric(owner, pd, df, target, feature_dtype), None
        self._feature_cols, self._target_col = features, target
        self._task, self._feature_dtype = task, feature_dtype
        super().__init__(
            X,
            Y,
            val_proportion=config.val_proportion,
            test_proportion=config.test_proportion,
            batch_sizes=config.batch_sizes,
            seed=config.seed,
            classes=classes,
        )

    def _prepare_inputs(self, inputs: Tensor, indices: SplitIndices) -> Tensor:
        if self._fit_source is None:
            return inputs
        (df, raw), self._fit_source = self._fit_source, None  # the DataFrame is not kept
        # Under a split plan the training membership is that plan's training split.
        self._standardizer = Standardizer.fit(df, rows=indices.train,
                                              columns=list(self._feature_cols),
                                              dtype=self._feature_dtype,
                                              membership=self._split_plan)
        return self._standardizer.transform(raw)

    @property
    def standardizer(self) -> Standardizer | None:
        """The Standardizer the loaders' features went through, or None."""
        return self._standardizer

    @property
    def feature_cols(self) -> list[ColumnLabel]:
        return list(self._feature_cols)

    @property
    def target_col(self) -> ColumnLabel:
        return self._target_col

    @property
    def task(self) -> str:
        return self._task

    def state(self) -> dict[str, Any]:
        """NNDataset's state plus the column selection, task and feature dtype."""
        extra: dict[str, Any] = {
            "feature_cols": list(self._feature_cols),
            "target_col": self._target_col,
            "task": self._task,
            "feature_dtype": str(self._feature_dtype).removeprefix("torch."),
        }
        if self._split_digest is not None:
            extra["split"] = self._split_digest
        if self._standardizer is not None:
            extra["standardizer"] = self._standardizer.state()
        return {**super().state(), **plain(extra)}

    def _split_rows(self, n: int) -> SplitIndices:
        return super()._split_rows(n) if self._planned is None else self._planned


def _planned_rows(owner: str, df: Any, split: Any, id_col: Any, source_identity: Any,
                  used: tuple[ColumnLabel, ...]) -> tuple[tuple[int, ...], SplitIndices] | None:
    """The rows a split plan admits (source order) and its splits as positions among them."""
    if split is None:
        if id_col is not None or source_identity is not None:
            raise ValueError(f"{owner}: id_col and source_identity are read only with split=")
        return None
    if not callable(getattr(split, "resolve", None)) or not callable(getattr(split, "digest",
                                                                             None)):
        raise TypeError(f"{owner}.split must be a SplitManifest (nnx.data_splits); "
                        f"got {type(split).__name__}")
    if split.id_kind == "position":
        if id_col is not None:
            raise ValueError(f"{owner}: the split plan records row positions, not ids; "
                             "drop id_col or plan over the ids")
        ids: Any = len(df)
    else:
        if id_col is None:
            raise ValueError(f"{owner}: a split plan over sample ids needs id_col=, the column "
                             "that holds them (never the index, which could match other rows)")
        _check_label(f"{owner}.id_col", id_col)
        if id_col in used:
            raise ValueError(f"{owner}: id_col {id_col!r} is also a feature or the target")
        ids = _column(owner, df, id_col)
    indices: SplitIndices = split.resolve(ids, source_identity=source_identity)
    admitted = sorted((*indices.train, *indices.val, *indices.test))
    where = {row: i for i, row in enumerate(admitted)}
    local = SplitIndices(*(tuple(where[r] for r in rows) for rows in indices))
    return tuple(admitted), local


def _check_standardize(owner: str, standardize: Any, features: tuple[ColumnLabel, ...],
                       dtype: torch.dtype) -> Standardizer | None:
    """A fitted Standardizer must match feature_cols and feature_dtype (before the split)."""
    if isinstance(standardize, bool):
        return None
    if not isinstance(standardize, Standardizer):
        raise TypeError(f"{owner}.standardize must be a bool or a fitted Standardizer; "
                        f"got {type(standardize).__name__}")
    if standardize.columns != list(features):
        raise PreprocessingError(f"{owner}: the standardizer's columns "
                                 f"{standardize.columns!r} must equal feature_cols "
                                 f"{list(features)!r}")
    if standardize.dtype != dtype:
        raise PreprocessingError(f"{owner}: the standardizer's dtype {standardize.dtype} must "
                                 f"equal feature_dtype {dtype}")
    return standardize


def _import_pandas() -> Any:
    try:
        return importlib.import_module("pandas")
    except ImportError as exc:
        raise ImportError(
            'NNTabularDataset needs pandas; install it with pip install "nnx-core[tabular]"'
        ) from exc


def _check_columns(
    owner: str, feature_cols: Any, target_col: Any
) -> tuple[tuple[ColumnLabel, ...], ColumnLabel]:
    if isinstance(feature_cols, (str, bytes)):
        raise ValueError(
            f"{owner}.feature_cols must be a list of column labels; got the string "
            f"{feature_cols!r} (write [{feature_cols!r}] for one column)"
        )
    try:
        features = tuple(feature_cols)
    except TypeError:
        raise ValueError(
            f"{owner}.feature_cols must be a list of column labels; got {feature_cols!r}"
        ) from None
    if not features:
        raise ValueError(f"{owner}.feature_cols must name at least one column")
    for i, col in enumerate(features):
        _check_label(f"{owner}.feature_cols[{i}]", col)
    _check_label(f"{owner}.target_col", target_col)
    if len(set(features)) != len(features):
        raise ValueError(f"{owner}.feature_cols must not repeat a column; got {list(features)!r}")
    if target_col in features:
        raise ValueError(f"{owner}: target_col {target_col!r} is also listed in feature_cols")
    return features, target_col


def _check_label(field: str, label: Any) -> None:
    if isinstance(label, bool) or not isinstance(label, (str, int)):
        raise ValueError(f"{field} must be a column label (str or int); got {label!r}")


def _column(owner: str, df: Any, col: ColumnLabel) -> Any:
    """The DataFrame's one column named ``col`` (a Series), or a ValueError naming it."""
    if col not in df.columns:
        raise ValueError(f"{owner}: column {col!r} is not in the DataFrame")
    series = df[col]
    if getattr(series, "ndim", 1) != 1:
        raise ValueError(f"{owner}: column label {col!r} appears more than once in the DataFrame")
    return series


def _numeric(owner: str, pd: Any, df: Any, col: ColumnLabel, dtype: torch.dtype) -> Tensor:
    """Column ``col`` as a finite ``dtype`` vector, or a ValueError naming the column."""
    series = _column(owner, df, col)
    kind = series.dtype.kind if isinstance(series.dtype, np.dtype) else None
    if not pd.api.types.is_numeric_dtype(series.dtype) or kind == "c":
        raise ValueError(f"{owner}: column {col!r} must be numeric; it has dtype {series.dtype}")
    # torch.tensor copies: the result never shares memory with the DataFrame. A reversed
    # or stepped frame (df.iloc[::-1]) gives a strided view torch cannot read; only then is
    # it first made contiguous.
    array = np.ascontiguousarray(series.to_numpy(dtype="float64", na_value=np.nan))
    values = torch.tensor(array, dtype=dtype)
    bad = ~torch.isfinite(values)
    if bool(bad.any()):
        first = series.index[int(bad.nonzero()[0, 0])]
        raise ValueError(
            f"{owner}: column {col!r} must be finite in {dtype}; {int(bad.sum())} value(s) "
            f"are missing, NaN or infinite (first at index {first!r})"
        )
    return values


def _encode_labels(owner: str, df: Any, col: ColumnLabel) -> tuple[Tensor, list[ClassLabel]]:
    """Class indices ``0..K-1`` for the target's labels in sorted order, and the labels."""
    series = _column(owner, df, col)
    missing = series.isna()
    if bool(missing.any()):
        first = series.index[int(np.flatnonzero(missing.to_numpy())[0])]
        raise ValueError(
            f"{owner}: target column {col!r} has {int(missing.sum())} missing label(s) "
            f"(first at index {first!r})"
        )
    values = series.to_numpy()
    try:
        labels, codes = np.unique(values, return_inverse=True)
    except TypeError as exc:
        raise ValueError(
            f"{owner}: target column {col!r} mixes label types that cannot be sorted ({exc})"
        ) from None
    classes: list[ClassLabel] = labels.tolist()
    for label in classes:
        if not isinstance(label, (str, int, float)):
            raise ValueError(
                f"{owner}: target column {col!r} labels must be str, int, float or bool; "
                f"got {type(label).__name__} {label!r}"
            )
    return torch.from_numpy(codes.reshape(-1).astype(np.int64)), classes
