"""nnx.datasets: random splits, loaders, refusals, the tabular wrapper and penguins."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import random_split

import nnx.datasets.dataset as dataset_mod
from nnx.datasets import (
    NNDataset,
    NNTabularDataset,
    SplitIndices,
    load_penguins,
    random_split_indices,
)


def rows(n: int, width: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """X whose first column is the row number, so batches reveal their rows."""
    X = torch.arange(n, dtype=torch.float32).unsqueeze(1).repeat(1, width)
    return X, torch.arange(n) % 3


def loader_rows(loader: Any) -> list[int]:
    return [int(v) for batch_x, _ in loader for v in batch_x[:, 0]]


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Record every tensor conversion, split and loader NNDataset would build."""
    calls: list[str] = []

    def wrap(name: str) -> None:
        real = getattr(dataset_mod, name)

        def recorder(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            return real(*args, **kwargs)

        monkeypatch.setattr(dataset_mod, name, recorder)

    for name in ("as_rows", "random_split_indices", "DataLoader"):
        wrap(name)
    return calls


@pytest.fixture
def pd() -> Any:
    return pytest.importorskip("pandas")


# --------------------------------------------------------------------------- splits


def test_split_sizes_disjoint_and_complete() -> None:
    X, Y = rows(100)
    ds = NNDataset(X, Y, val_proportion=0.2, test_proportion=0.1, seed=0)
    train, val, test = ds.split_indices
    assert (len(train), len(val), len(test)) == (70, 20, 10)
    assert not (set(train) & set(val) or set(train) & set(test) or set(val) & set(test))
    assert sorted(train + val + test) == list(range(100))
    assert list(train) == sorted(train)
    assert sorted(loader_rows(ds.train_loader)) == list(train)
    assert loader_rows(ds.val_loader) == list(val)
    assert loader_rows(ds.test_loader) == list(test)


def test_random_split_indices_is_torch_random_split_with_the_seed() -> None:
    parts = random_split(range(50), [35, 10, 5], generator=torch.Generator().manual_seed(11))
    expected = tuple(tuple(sorted(p.indices)) for p in parts)
    got = random_split_indices(50, (0.2, 0.1), 11)
    assert isinstance(got, SplitIndices)
    assert tuple(got) == expected


def test_proportions_round_down_on_the_written_decimal() -> None:
    # 100 * 0.29 is 28.999... in binary floating point; the split still gets 29 rows.
    train, val, test = random_split_indices(100, (0.29, 0.0), 0)
    assert (len(train), len(val), len(test)) == (71, 29, 0)
    train, val, test = random_split_indices(9, (0.2, 0.2), 0)
    assert (len(train), len(val), len(test)) == (7, 1, 1)


def test_same_seed_same_split_different_seed_different_split() -> None:
    X, Y = rows(60)
    a = NNDataset(X, Y, val_proportion=0.25, test_proportion=0.25, seed=7)
    b = NNDataset(X, Y, val_proportion=0.25, test_proportion=0.25, seed=7)
    c = NNDataset(X, Y, val_proportion=0.25, test_proportion=0.25, seed=8)
    assert a.split_indices == b.split_indices
    assert a.split_indices != c.split_indices
    assert sorted(a.split_indices.val) != sorted(c.split_indices.val)


def test_seeded_split_leaves_global_rng_alone_unseeded_uses_it() -> None:
    X, Y = rows(40)
    torch.manual_seed(123)
    before = torch.get_rng_state()
    NNDataset(X, Y, seed=5)
    assert torch.equal(torch.get_rng_state(), before)

    torch.manual_seed(99)
    first = NNDataset(X, Y).split_indices
    assert not torch.equal(torch.get_rng_state(), before)
    torch.manual_seed(99)
    assert NNDataset(X, Y).split_indices == first


def test_none_batch_size_is_the_whole_split_in_one_batch() -> None:
    X, Y = rows(50)
    ds = NNDataset(X, Y, val_proportion=0.2, test_proportion=0.1,
                   batch_sizes=(None, None, None), seed=1)
    for loader, size in ((ds.train_loader, 35), (ds.val_loader, 10), (ds.test_loader, 5)):
        batches = list(loader)
        assert len(batches) == 1
        assert batches[0][0].shape == (size, 1) and batches[0][1].shape == (size,)


def test_counted_batch_sizes_and_numpy_integers() -> None:
    X, Y = rows(100)
    ds = NNDataset(X, Y, batch_sizes=(np.int64(32), 7, None), val_proportion=0.2, seed=0)
    assert [len(b[0]) for b in ds.train_loader] == [32, 32, 16]
    assert [len(b[0]) for b in ds.val_loader] == [7, 7, 6]
    assert ds.state()["batch_sizes"] == [32, 7, None]
    assert type(ds.state()["batch_sizes"][0]) is int


def test_empty_optional_splits_publish_none_loaders() -> None:
    X, Y = rows(30)
    ds = NNDataset(X, Y, val_proportion=0.0, seed=0)
    assert ds.val_loader is None and ds.test_loader is None
    assert len(ds.split_indices.train) == 30
    # One row: 0.2 of it rounds down to nothing, and train keeps the row.
    tiny = NNDataset(torch.ones(1, 2), torch.zeros(1, dtype=torch.long), seed=0)
    assert tiny.val_loader is None and len(tiny.split_indices.train) == 1


def test_train_loader_shuffles_reproducibly_val_and_test_never_shuffle() -> None:
    X, Y = rows(80)
    a = NNDataset(X, Y, test_proportion=0.1, seed=3, batch_sizes=(8, 4, 4))
    b = NNDataset(X, Y, test_proportion=0.1, seed=3, batch_sizes=(8, 4, 4))
    order_a, order_b = loader_rows(a.train_loader), loader_rows(b.train_loader)
    assert order_a == order_b
    assert sorted(order_a) == list(a.split_indices.train)
    assert order_a != list(a.split_indices.train)
    assert loader_rows(a.train_loader) != order_a  # the next epoch is a new order
    assert loader_rows(a.val_loader) == list(a.split_indices.val)
    assert loader_rows(a.test_loader) == list(a.split_indices.test)
    fixed = NNDataset(X, Y, seed=3, shuffle=False)
    assert loader_rows(fixed.train_loader) == list(fixed.split_indices.train)


def test_numpy_inputs_dims_and_classes() -> None:
    X = np.random.default_rng(0).normal(size=(20, 2, 5))
    Y = np.arange(20) % 4
    ds = NNDataset(X, Y, seed=0, classes=["a", "b", "c", "d"])
    assert ds.input_dim == 10 and ds.n_classes == 4
    assert ds.classes == ["a", "b", "c", "d"]
    assert NNDataset(torch.zeros(5), torch.zeros(5), seed=0).input_dim == 1
    assert NNDataset(torch.zeros(5, 3), torch.zeros(5), seed=0).n_classes is None
    assert NNDataset(torch.zeros(5, 3), torch.tensor([0, 1, 4, 1, 0]), seed=0).n_classes == 5
    assert NNDataset(torch.zeros(5, 3), torch.zeros(5), seed=0).classes is None


def test_state_is_json_and_holds_no_data() -> None:
    X, Y = rows(10)
    state = NNDataset(X, Y, val_proportion=0.2, seed=4).state()
    assert state == {
        "n_rows": 10, "val_proportion": 0.2, "test_proportion": 0.0,
        "batch_sizes": [32, None, None], "seed": 4, "shuffle": True,
    }
    json.dumps(state, allow_nan=False)


# ------------------------------------------------------------------------ refusals


@pytest.mark.parametrize("index", [0, 1, 2])
@pytest.mark.parametrize("bad", [0, True, 2.0, "4", -1])
def test_bad_batch_size_named_by_index_before_anything(
    spy: list[str], index: int, bad: Any
) -> None:
    sizes: list[Any] = [32, None, None]
    sizes[index] = bad
    before = torch.get_rng_state()
    with pytest.raises(ValueError, match=rf"NNDataset\.batch_sizes\[{index}\] must be an integer"):
        # X=None would fail conversion: the batch sizes are checked first.
        NNDataset(None, None, batch_sizes=tuple(sizes))
    assert spy == []
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize("sizes", [(32, None), (1, 2, 3, 4), "32", 32])
def test_batch_sizes_must_be_a_3_sequence(spy: list[str], sizes: Any) -> None:
    with pytest.raises(ValueError, match=r"NNDataset\.batch_sizes"):
        NNDataset(*rows(10), batch_sizes=sizes)
    assert spy == []


@pytest.mark.parametrize(
    ("val", "test", "message"),
    [
        (math.nan, 0.0, r"val_proportion must be a finite real"),
        (0.1, math.inf, r"test_proportion must be a finite real"),
        (-0.1, 0.0, r"val_proportion must be in \[0, 1\)"),
        (0.0, -0.5, r"test_proportion must be in \[0, 1\)"),
        (1.0, 0.0, r"val_proportion must be in \[0, 1\)"),
        (0.5, 0.5, r"val_proportion \+ test_proportion must be < 1"),
        (0.7, 0.3, r"val_proportion \+ test_proportion must be < 1"),
        ("0.2", 0.0, r"val_proportion must be a finite real"),
        (True, 0.0, r"val_proportion must be a finite real"),
    ],
)
def test_bad_proportions_refused_before_anything(
    spy: list[str], val: Any, test: Any, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        NNDataset(*rows(10), val_proportion=val, test_proportion=test)
    assert spy == []


@pytest.mark.parametrize("seed", [-1, 1.5, True, "3", 2**64])
def test_bad_seed_refused(spy: list[str], seed: Any) -> None:
    with pytest.raises(ValueError, match=r"NNDataset\.seed must be an integer"):
        NNDataset(*rows(10), seed=seed)
    assert spy == []


def test_bad_shuffle_refused(spy: list[str]) -> None:
    with pytest.raises(ValueError, match=r"NNDataset\.shuffle must be a bool"):
        NNDataset(*rows(10), shuffle=1)
    assert spy == []


def test_mismatched_lengths_and_empty_data_refused(spy: list[str]) -> None:
    with pytest.raises(ValueError, match=r"X has 10 rows but Y has 9"):
        NNDataset(torch.zeros(10, 2), torch.zeros(9))
    with pytest.raises(ValueError, match=r"at least 1 row"):
        NNDataset(torch.zeros(0, 2), torch.zeros(0))
    assert "random_split_indices" not in spy and "DataLoader" not in spy


def test_non_array_inputs_refused(spy: list[str]) -> None:
    with pytest.raises(TypeError, match=r"NNDataset\.X must be a torch\.Tensor or numpy"):
        NNDataset([[1.0], [2.0]], torch.zeros(2))
    with pytest.raises(TypeError, match=r"NNDataset\.Y must hold numbers"):
        NNDataset(torch.zeros(2, 1), np.array(["a", "b"]))
    with pytest.raises(ValueError, match=r"NNDataset\.X must have a row axis"):
        NNDataset(torch.tensor(1.0), torch.zeros(1))
    assert "random_split_indices" not in spy


def test_empty_train_split_raises() -> None:
    with pytest.raises(ValueError, match=r"the train split is empty: 0 rows"):
        random_split_indices(0, (0.0, 0.0), 0)


def test_classes_must_match_integer_targets(spy: list[str]) -> None:
    with pytest.raises(ValueError, match=r"class indices in \[0, 2\] but classes names 2"):
        NNDataset(torch.zeros(3, 1), torch.tensor([0, 1, 2]), classes=["a", "b"])
    with pytest.raises(ValueError, match=r"classes needs integer class-index targets"):
        NNDataset(torch.zeros(3, 1), torch.zeros(3), classes=["a"])
    with pytest.raises(ValueError, match=r"classes must be unique"):
        NNDataset(torch.zeros(3, 1), torch.zeros(3, dtype=torch.long), classes=["a", "a"])
    with pytest.raises(ValueError, match=r"classes must be a sequence"):
        NNDataset(torch.zeros(3, 1), torch.zeros(3, dtype=torch.long), classes="ab")
    assert "random_split_indices" not in spy


# ------------------------------------------------------------------------- tabular


def frame(pd: Any) -> Any:
    return pd.DataFrame(
        {
            "a": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0],
            "b": [10, 20, 30, 40, 50, 60, 70, 80, 90, 100],
            "label": ["dog", "cat", "eel", "cat", "dog", "cat", "eel", "dog", "cat", "cat"],
            "size": [0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5, 8.5, 9.5],
            "name": list("abcdefghij"),
        }
    )


def test_tabular_encodes_sorted_labels_and_keeps_the_frame(pd: Any) -> None:
    df = frame(pd)
    before = df.copy(deep=True)
    ds = NNTabularDataset(df, ["a", "b"], "label", val_proportion=0.2, seed=0)
    pd.testing.assert_frame_equal(df, before)
    assert ds.classes == ["cat", "dog", "eel"] and ds.n_classes == 3 and ds.input_dim == 2
    batches = [*ds.train_loader, *ds.val_loader]  # one pass: train reshuffles per pass
    X, Y = torch.cat([x for x, _ in batches]), torch.cat([y for _, y in batches])
    assert X.dtype == torch.float32 and Y.dtype == torch.int64
    decoded = {(float(x[0]), ds.classes[int(y)]) for x, y in zip(X, Y, strict=True)}
    assert decoded == {(float(a), lab) for a, lab in zip(df["a"], df["label"], strict=True)}
    assert ds.split_indices == NNDataset(torch.zeros(10), torch.zeros(10), seed=0).split_indices


def test_tabular_integer_labels_regression_and_state(pd: Any) -> None:
    df = pd.DataFrame({"x": [0.1, 0.2, 0.3, 0.4], "y": [10, 3, 10, 7]})
    ds = NNTabularDataset(df, ["x"], "y", val_proportion=0.0, seed=1)
    assert ds.classes == [3, 7, 10]
    (x, y), = list(NNTabularDataset(df, ["x"], "y", val_proportion=0.0, seed=1,
                                    batch_sizes=(None, None, None)).train_loader)
    pairs = sorted((round(a, 6), b) for a, b in zip(x[:, 0].tolist(), y.tolist(), strict=True))
    assert pairs == [(0.1, 2), (0.2, 0), (0.3, 2), (0.4, 1)]
    reg = NNTabularDataset(df, ["x"], "y", task="regression", seed=1, val_proportion=0.0,
                           feature_dtype=torch.float64, batch_sizes=(None, None, None))
    assert reg.classes is None and reg.n_classes is None
    (x, y), = list(reg.train_loader)
    assert x.dtype == torch.float64 and y.dtype == torch.float64 and y.shape == (4,)
    y.add_(1000.0)  # the tensors are copies: the frame never changes
    assert df["y"].tolist() == [10, 3, 10, 7]
    assert reg.state() == {
        "n_rows": 4, "val_proportion": 0.0, "test_proportion": 0.0,
        "batch_sizes": [None, None, None], "seed": 1, "shuffle": True,
        "feature_cols": ["x"], "target_col": "y", "task": "regression",
        "feature_dtype": "float64",
    }


@pytest.mark.parametrize("task", ["classification", "regression"])
@pytest.mark.parametrize("standardize", [False, True, "fitted"])
def test_tabular_reads_reversed_and_stepped_frames_like_their_copies(
    pd: Any, task: str, standardize: Any
) -> None:
    df = frame(pd).assign(y=[3, 1, 2, 3, 1, 2, 3, 1, 2, 3])
    for view in (df.iloc[::-1], df.iloc[::2], df[::-1][["a", "b", "y"]]):
        copy = view.copy()
        copy.index = view.index  # same labels, freshly laid out (positive strides)
        settings: dict[str, Any] = {"task": task, "seed": 0, "feature_dtype": torch.float64}
        if standardize == "fitted":
            settings["standardize"] = NNTabularDataset(copy, ["a", "b"], "y",
                                                       standardize=True, **settings).standardizer
        else:
            settings["standardize"] = standardize
        expected = NNTabularDataset(copy, ["a", "b"], "y", **settings)
        got = NNTabularDataset(view, ["a", "b"], "y", **settings)  # crashed in torch before
        for ours, theirs in zip(got.train_loader, expected.train_loader, strict=True):
            assert all(torch.equal(o, t) for o, t in zip(ours, theirs, strict=True))
        assert got.state() == expected.state()


@pytest.mark.parametrize(
    ("features", "target", "message"),
    [
        (["a", "missing"], "label", r"column 'missing' is not in the DataFrame"),
        (["a"], "nope", r"column 'nope' is not in the DataFrame"),
        (["a", "name"], "label", r"column 'name' must be numeric"),
        ("a", "label", r"feature_cols must be a list of column labels; got the string 'a'"),
        (["a", "label"], "label", r"target_col 'label' is also listed in feature_cols"),
        (["a", "a"], "label", r"must not repeat a column"),
        ([], "label", r"must name at least one column"),
        ([1.5], "label", r"feature_cols\[0\] must be a column label"),
    ],
)
def test_tabular_column_refusals(
    pd: Any, spy: list[str], features: Any, target: Any, message: str
) -> None:
    df = frame(pd)
    before = df.copy(deep=True)
    with pytest.raises(ValueError, match=message):
        NNTabularDataset(df, features, target, seed=0)
    assert spy == []
    pd.testing.assert_frame_equal(df, before)


def test_tabular_non_finite_and_missing_values_refused(pd: Any, spy: list[str]) -> None:
    df = frame(pd)
    df.loc[3, "a"] = math.nan
    with pytest.raises(ValueError, match=r"column 'a' must be finite .* \(first at index 3\)"):
        NNTabularDataset(df, ["a", "b"], "label")
    df = frame(pd)
    df.loc[5, "size"] = math.inf
    with pytest.raises(ValueError, match=r"column 'size' must be finite"):
        NNTabularDataset(df, ["size"], "label")
    with pytest.raises(ValueError, match=r"column 'size' must be finite"):
        NNTabularDataset(df, ["a"], "size", task="regression")
    big = pd.DataFrame({"x": [1e39, 1.0], "y": [0, 1]})  # overflows float32
    with pytest.raises(ValueError, match=r"column 'x' must be finite in torch\.float32"):
        NNTabularDataset(big, ["x"], "y")
    df = frame(pd)
    df.loc[2, "label"] = None
    with pytest.raises(ValueError, match=r"target column 'label' has 1 missing label"):
        NNTabularDataset(df, ["a"], "label")
    assert spy == []


def test_tabular_settings_checked_before_the_frame(pd: Any, spy: list[str]) -> None:
    with pytest.raises(ValueError, match=r"NNTabularDataset\.batch_sizes\[0\] must be an integer"):
        NNTabularDataset(None, ["a"], "label", batch_sizes=(0, None, None))
    with pytest.raises(ValueError, match=r"NNTabularDataset\.val_proportion"):
        NNTabularDataset(None, ["a"], "label", val_proportion=math.nan)
    with pytest.raises(ValueError, match=r"NNTabularDataset\.task must be one of"):
        NNTabularDataset(None, ["a"], "label", task="ranking")
    with pytest.raises(ValueError, match=r"feature_dtype must be a floating torch\.dtype"):
        NNTabularDataset(None, ["a"], "label", feature_dtype=torch.int64)
    with pytest.raises(TypeError, match=r"df must be a pandas DataFrame"):
        NNTabularDataset({"a": [1.0]}, ["a"], "label")
    assert spy == []


def test_tabular_without_pandas_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now fails
    with pytest.raises(ImportError, match=r'pip install "nnx-core\[tabular\]"'):
        NNTabularDataset(object(), ["a"], "label")


# ------------------------------------------------------------------------ penguins


def test_load_penguins() -> None:
    X, y, features, classes = load_penguins()
    assert X.shape == (333, 4) and X.dtype == torch.float32
    assert y.shape == (333,) and y.dtype == torch.int64
    assert features == ["bill_length_mm", "bill_depth_mm", "flipper_length_mm", "body_mass_g"]
    assert classes == ["Adelie", "Chinstrap", "Gentoo"]
    assert y.bincount().tolist() == [146, 68, 119]
    assert bool(torch.isfinite(X).all())
    assert X[0].tolist() == pytest.approx([39.1, 18.7, 181.0, 3750.0])
    ds = NNDataset(X, y, val_proportion=0.2, test_proportion=0.1, seed=0, classes=classes)
    assert ds.n_classes == 3 and ds.input_dim == 4
    assert [len(s) for s in ds.split_indices] == [234, 66, 33]
