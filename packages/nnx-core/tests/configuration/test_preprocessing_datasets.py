"""Raw and transformed views of datasets (spec §13.4): standardize=, split transforms."""

from __future__ import annotations

import pickle
from typing import Any, NamedTuple

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from nnx.datasets import NNDataset, NNTabularDataset
from nnx.preprocessing import PreprocessingError, SplitView, Standardizer, describe_transform

pd = pytest.importorskip("pandas")  # the tabular extra; the fit itself needs no pandas

FEATURES = ["x1", "x2"]


def table(n: int = 40) -> pd.DataFrame:
    g = np.random.default_rng(3)
    return pd.DataFrame({"x1": g.normal(10.0, 3.0, n), "note": ["n"] * n,
                         "x2": g.integers(0, 50, n), "y": ["ab"[i % 2] for i in range(n)]})


def tabular(df: pd.DataFrame, **kw: Any) -> NNTabularDataset:
    kw.setdefault("seed", 5)
    return NNTabularDataset(df, FEATURES, "y", val_proportion=0.25, test_proportion=0.25,
                            batch_sizes=(None, None, None), **kw)


def features(loader: Any) -> torch.Tensor:
    """A loader's inputs in split order (the train loader itself shuffles)."""
    split = loader.dataset
    return torch.stack([split[i][0] for i in range(len(split))])


# -- NNTabularDataset(standardize=...) -----------------------------------------------------

def test_standardize_true_fits_on_the_training_split_with_the_same_split_and_draw():
    df = table()
    before = df.copy()
    plain_ds, std_ds = tabular(df), tabular(df, standardize=True)
    assert std_ds.split_indices == plain_ds.split_indices
    train = std_ds.split_indices.train
    expected = Standardizer.fit(df, rows=train, columns=FEATURES)
    assert std_ds.standardizer == expected
    prepared = expected.transform(df[FEATURES])
    assert torch.equal(features(std_ds.train_loader), prepared[list(train)])
    assert torch.equal(features(std_ds.val_loader), prepared[list(std_ds.split_indices.val)])
    pd.testing.assert_frame_equal(df, before)  # the raw DataFrame is untouched
    assert plain_ds.standardizer is None
    # seed=None: the global torch RNG draws exactly as without standardization
    torch.manual_seed(11)
    a = tabular(df, seed=None).split_indices, torch.rand(3)
    torch.manual_seed(11)
    b = tabular(df, seed=None, standardize=True).split_indices, torch.rand(3)
    assert a[0] == b[0] and torch.equal(a[1], b[1])


def test_standardize_reads_only_training_rows_for_the_statistics():
    df = table()
    ds = tabular(df, standardize=True)
    held_out = [*ds.split_indices.val, *ds.split_indices.test]
    shifted = df.copy()
    shifted.loc[held_out, "x1"] += 1e6  # held-out values cannot move the fit
    assert tabular(shifted, standardize=True).standardizer == ds.standardizer


def test_a_fitted_standardizer_is_applied_without_refitting():
    df = table()
    fitted = Standardizer.fit(df, rows=range(10), columns=FEATURES)
    ds = tabular(df, standardize=fitted)
    assert ds.standardizer is fitted
    assert torch.equal(features(ds.train_loader),
                       fitted.transform(df[FEATURES])[list(ds.split_indices.train)])
    assert ds.state()["standardizer"] == fitted.state()
    assert "standardizer" not in tabular(df).state()


@pytest.mark.parametrize(("make", "error", "match"), [
    (lambda df: Standardizer.fit(df, rows=range(9), columns=["x2", "x1"]),
     PreprocessingError, "must equal feature_cols"),
    (lambda df: Standardizer.fit(df, rows=range(9), columns=FEATURES, dtype=torch.float64),
     PreprocessingError, "must equal feature_dtype"),
    (lambda df: "yes", TypeError, "bool or a fitted Standardizer"),
])
def test_a_mismatched_standardizer_is_refused_before_the_split(make, error, match):
    df = table()
    bad = make(df)
    torch.manual_seed(0)
    rng = torch.get_rng_state()
    with pytest.raises(error, match=match):
        tabular(df, seed=None, standardize=bad)
    assert torch.equal(torch.get_rng_state(), rng)  # no split was drawn


def test_a_non_finite_feature_is_refused_before_the_split():
    df = table()
    df.loc[7, "x1"] = float("inf")
    rng = torch.get_rng_state()
    with pytest.raises(PreprocessingError, match="'x1'"):
        tabular(df, seed=None, standardize=True)
    assert torch.equal(torch.get_rng_state(), rng)


# -- NNDataset(train_transform=, eval_transform=) and SplitView ---------------------------

def doubled(x: torch.Tensor) -> torch.Tensor:
    return x.mul_(2)  # in place on purpose: the view hands it a private copy


def rows_dataset(**kw: Any) -> NNDataset:
    X = torch.arange(20, dtype=torch.float32).unsqueeze(1).repeat(1, 2)
    Y = torch.arange(20) % 3
    return NNDataset(X, Y, val_proportion=0.25, test_proportion=0.25, seed=1,
                     batch_sizes=(4, None, None), shuffle=False,
                     classes=["a", "b", "c"], **kw)


def test_train_and_eval_transforms_apply_to_inputs_only():
    plain_ds = rows_dataset()
    ds = rows_dataset(train_transform=doubled, eval_transform=torch.neg)
    base_x = ds.train_loader.dataset.dataset.tensors[0].clone()
    train = [(x, y) for x, y in ds.train_loader]
    plain_train = [(x, y) for x, y in plain_ds.train_loader]
    for (x, y), (px, py) in zip(train, plain_train, strict=True):
        assert torch.equal(x, px * 2) and torch.equal(y, py)  # targets pass through
    (vx, vy), = list(ds.val_loader)
    (pvx, pvy), = list(plain_ds.val_loader)
    assert torch.equal(vx, -pvx) and torch.equal(vy, pvy)
    view = ds.train_loader.dataset
    assert isinstance(view, SplitView)
    assert view.indices == ds.split_indices.train  # sample ids pass through
    assert view.dataset is ds.val_loader.dataset.dataset  # one base, aliased
    assert view.classes == ["a", "b", "c"]
    assert torch.equal(view.dataset.tensors[0], base_x)  # the base is never modified
    assert ds.state()["train_transform"] == describe_transform(doubled)
    assert ds.state()["train_transform"]["reconstructible"] is False
    assert "train_transform" not in plain_ds.state()
    assert plain_ds.state() == {k: v for k, v in ds.state().items() if "transform" not in k}


def test_a_standardizer_works_as_a_view_transform_on_single_rows():
    X = torch.tensor(np.random.default_rng(0).normal(5.0, 2.0, (30, 3)))
    ds = NNDataset(X, torch.zeros(30), val_proportion=0.2, seed=0,
                   batch_sizes=(None, None, None), shuffle=False)
    fitted = Standardizer.fit(X, rows=ds.split_indices.train, dtype=torch.float64)
    viewed = NNDataset(X, torch.zeros(30), val_proportion=0.2, seed=0,
                       batch_sizes=(None, None, None), shuffle=False,
                       train_transform=fitted, eval_transform=fitted)
    assert torch.equal(features(viewed.val_loader), fitted.transform(X)[list(ds.split_indices.val)])
    desc = viewed.state()["eval_transform"]
    assert desc["reconstructible"] is True
    assert Standardizer.from_state(desc["state"]) == fitted


class Sample(NamedTuple):
    image: torch.Tensor
    label: int


class Samples:
    """A map-style base with its own transform, returning the sample kind asked for."""

    def __init__(self, kind: str) -> None:
        self.kind, self.classes = kind, ["cat", "dog"]
        self.transform = lambda x: x + 100  # the base's own transform runs first
        self.data = torch.arange(6, dtype=torch.float32)

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> Any:
        x, y = self.transform(self.data[i : i + 1]), i % 2
        return {"tuple": (x, y, i), "list": [x, y], "named": Sample(x, y),
                "bare": x, "dict": {"x": x, "y": y}}[self.kind]


@pytest.mark.parametrize("kind", ["tuple", "list", "named", "bare"])
def test_sample_containers_keep_their_type_and_only_the_input_changes(kind):
    base = Samples(kind)
    view = SplitView(base, [4, 1], transform=lambda x: x * 10)
    sample = view[0]
    if kind == "bare":
        assert torch.equal(sample, torch.tensor([1040.0]))
        return
    assert type(sample) is type(base[4])
    assert torch.equal(sample[0], torch.tensor([1040.0])) and sample[1] == 0
    assert list(sample[2:]) == list(base[4][2:])
    assert view.classes == ["cat", "dog"] and len(view) == 2
    assert view.dataset is base and view.indices == (4, 1)
    assert base.classes == ["cat", "dog"] and torch.equal(base.data, torch.arange(6.0))
    assert view.state() == {"rows": 2, "transform": describe_transform(view.transform)}
    assert view.state()["transform"]["reconstructible"] is False


def test_dict_samples_and_bad_arguments_are_refused():
    base = Samples("dict")
    view = SplitView(base, [0], transform=torch.neg)
    with pytest.raises(PreprocessingError, match="dict sample"):
        view[0]
    assert SplitView(base, [0])[0]["y"] == 0  # no transform, nothing to disambiguate
    with pytest.raises(TypeError, match="callable"):
        SplitView(base, [0], transform="neg")  # type: ignore[arg-type]
    with pytest.raises(PreprocessingError, match="positions"):
        SplitView(base, [0, 6])
    with pytest.raises(AttributeError):
        view.transform = None  # type: ignore[misc]
    X, Y = torch.zeros(10, 2), torch.zeros(10)
    with pytest.raises(TypeError, match="train_transform"):
        NNDataset(X, Y, train_transform=3)  # type: ignore[arg-type]


def noisy(x: torch.Tensor) -> torch.Tensor:
    return x + torch.rand_like(x)


def test_views_pickle_and_workers_return_the_same_evaluation_samples():
    ds = rows_dataset(train_transform=noisy, eval_transform=torch.neg)
    view = ds.val_loader.dataset
    again = pickle.loads(pickle.dumps(view))
    assert [again[i][0].tolist() for i in range(len(again))] == \
        [view[i][0].tolist() for i in range(len(view))]
    single = list(DataLoader(view, batch_size=2))
    # the train view draws randomness, read in between: evaluation stays the same
    _ = [x for x, _ in ds.train_loader]
    workers = list(DataLoader(view, batch_size=2, num_workers=1))
    assert len(single) == len(workers)
    for (a, ay), (b, by) in zip(single, workers, strict=True):
        assert torch.equal(a, b) and torch.equal(ay, by)
