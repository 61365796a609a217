"""NNTabularDataset(split=..., id_col=..., source_identity=...) (spec §13.3)."""

from __future__ import annotations

import pytest
import torch

from nnx import NNTabularDataset
from nnx.data_splits import SplitError, SplitManifest, plan_split
from nnx.provenance import hash_bytes

pd = pytest.importorskip("pandas")  # NNTabularDataset's `tabular` extra

SOURCE = hash_bytes(b"patients v1")


def _frame(n: int = 24):
    return pd.DataFrame({
        "row_id": [f"row{i:03d}" for i in range(n)],
        "patient": [i // 3 for i in range(n)],
        "age": [float(i) for i in range(n)],
        "label": [i % 2 for i in range(n)],
    })


def _group_plan(df, **kwargs) -> SplitManifest:
    return plan_split(df["row_id"], strategy="group", groups=df["patient"],
                      proportions=(0.5, 0.25, 0.25), seed=7, **kwargs)


def _dataset(df, plan, **kwargs):
    return NNTabularDataset(df=df, feature_cols=["age"], target_col="label", split=plan,
                            id_col="row_id", batch_sizes=(None, None, None), **kwargs)


def _ages(loader) -> set[float]:
    return set() if loader is None else {float(x) for xb, _ in loader for x in xb[:, 0]}


def _planned_ages(df, ids) -> set[float]:
    return set(df.set_index("row_id").loc[list(ids), "age"].astype(float))


def test_the_loaders_hold_exactly_the_planned_rows_in_any_row_order():
    df = _frame()
    plan = _group_plan(df, source=SOURCE)
    for frame in (df, df.sample(frac=1.0, random_state=3)):
        ds = _dataset(frame, plan, source_identity=SOURCE)
        assert _ages(ds.train_loader) == _planned_ages(df, plan.train)
        assert _ages(ds.val_loader) == _planned_ages(df, plan.val)
        assert _ages(ds.test_loader) == _planned_ages(df, plan.test)
        assert ds.state()["split"] == plan.digest()


def test_without_a_plan_state_gains_nothing():
    ds = NNTabularDataset(df=_frame(), feature_cols=["age"], target_col="label", seed=0)
    assert "split" not in ds.state()
    with pytest.raises(ValueError, match="only with split="):
        NNTabularDataset(df=_frame(), feature_cols=["age"], target_col="label", id_col="row_id")


def test_gap_rows_are_in_no_loader_and_their_nan_and_extra_label_are_ignored():
    df = _frame(10)
    df["t"] = [1, 2, 3, 3, 4, 5, 5, 6, 7, 8]
    plan = plan_split(df["row_id"], strategy="chronological", times=df["t"], cutoffs=(3, 5),
                      gap=1)
    assert set(plan.excluded) == {"row001", "row004"}
    df.loc[1, "age"] = float("nan")  # a gap row: never admitted, never converted
    df["label"] = df["label"].astype(object)
    df.loc[4, "label"] = "only-in-the-gap"
    ds = _dataset(df, plan)
    seen = _ages(ds.train_loader) | _ages(ds.val_loader) | _ages(ds.test_loader)
    assert seen == {0.0, 2.0, 3.0, 5.0, 6.0, 7.0, 8.0, 9.0}
    assert "only-in-the-gap" not in ds.classes
    # Ties at the cutoff t=3 (rows 2 and 3) both start validation.
    assert _ages(ds.val_loader) == {2.0, 3.0}


def test_an_empty_optional_split_publishes_a_none_loader():
    df = _frame(10)
    plan = plan_split(df["row_id"], strategy="chronological", times=list(range(10)),
                      cutoffs=(7, None))
    ds = _dataset(df, plan)
    assert ds.test_loader is None and _ages(ds.val_loader) == {7.0, 8.0, 9.0}


@pytest.mark.parametrize("change, match", [
    ("identity", "source changed"),
    ("no identity", "pass the same identity"),
    ("duplicate", "repeats the id"),
    ("missing", "missing from the source"),
    ("unexpected", "not in the plan"),
])
def test_refusals_come_before_any_tensor(change, match):
    df = _frame()
    plan = _group_plan(df, source=SOURCE)
    identity = SOURCE
    if change == "identity":
        identity = hash_bytes(b"patients v2")
    elif change == "no identity":
        identity = None
    elif change == "duplicate":
        df.loc[1, "row_id"] = "row000"
    elif change == "missing":
        df = df.iloc[1:]
    else:
        df.loc[0, "row_id"] = "stranger"
    # A non-numeric feature would fail the tensor conversion: the SplitError comes first.
    df = df.assign(age=["not a number"] * len(df))
    with pytest.raises(SplitError, match=match):
        _dataset(df, plan, source_identity=identity)


def test_a_plan_over_ids_needs_the_id_column():
    df = _frame()
    with pytest.raises(ValueError, match="needs id_col="):
        NNTabularDataset(df=df, feature_cols=["age"], target_col="label", split=_group_plan(df))
    with pytest.raises(ValueError, match="also a feature"):
        NNTabularDataset(df=df, feature_cols=["age"], target_col="label",
                         split=_group_plan(df), id_col="age")


def test_a_positional_plan_replays_by_row_count_and_identity():
    df = _frame()
    plan = plan_split(strategy="stratified", labels=df["label"], proportions=(0.5, 0.25, 0.25),
                      seed=1, source=SOURCE)
    ds = NNTabularDataset(df=df, feature_cols=["age"], target_col="label", split=plan,
                          source_identity=SOURCE, batch_sizes=(None, None, None))
    assert ds.split_indices == plan.resolve(len(df), source_identity=SOURCE)
    assert _ages(ds.val_loader) == {float(i) for i in plan.val}
    with pytest.raises(SplitError, match="source changed"):
        NNTabularDataset(df=df, feature_cols=["age"], target_col="label", split=plan,
                         source_identity="another file")


def test_the_spec_example_runs_from_a_saved_plan(tmp_path):
    df = _frame()
    source = hash_bytes(df.to_csv(index=False).encode())
    plan = plan_split(df["row_id"], strategy="group", groups=df["patient"],
                      proportions=(0.7, 0.15, 0.15), seed=7, source=source)
    plan.save(tmp_path / "split.json")
    dataset = NNTabularDataset(df=df, feature_cols=["age"], target_col="label",
                               split=SplitManifest.load(tmp_path / "split.json"),
                               id_col="row_id", source_identity=source)
    rows = sum(len(xb) for xb, _ in dataset.train_loader)
    assert rows == len(plan.train)
    assert isinstance(next(iter(dataset.train_loader))[0], torch.Tensor)


def test_a_zero_proportion_leaves_its_loader_none():
    df = _frame()
    plan = plan_split(df["row_id"], strategy="group", groups=df["patient"],
                      proportions=(0.75, 0.25, 0.0), seed=2)
    ds = _dataset(df, plan)
    assert plan.test == () and ds.test_loader is None and ds.val_loader is not None


def test_a_standardizer_under_a_plan_fits_the_plans_training_rows_and_names_the_plan():
    """split= and standardize=True together: the statistics are the planned training
    rows' (population, float64) and the fit's membership is the plan's digest."""
    df = _frame()
    plan = _group_plan(df, source=SOURCE)
    ds = _dataset(df, plan, source_identity=SOURCE, standardize=True)
    train_ages = torch.tensor(sorted(_planned_ages(df, plan.train)), dtype=torch.float64)
    state = ds.standardizer.state()
    assert state["mean"] == [float(train_ages.mean())]
    assert state["scale"] == [float(train_ages.std(unbiased=False))]
    assert state["membership"] == {"identity": "digest", "value": plan.digest()}
    served = torch.cat([xb[:, 0] for xb, _ in ds.train_loader]).double()
    assert abs(float(served.mean())) < 1e-6  # the loaders serve standardized features


def test_the_spec_example_runs_verbatim_with_hash_file(tmp_path, monkeypatch):
    """§13.3's example as written: hash_file("rows.csv"), save / load, two features."""
    monkeypatch.chdir(tmp_path)
    df = _frame().assign(income=[1000.0 + 10 * i for i in range(24)])
    df.to_csv("rows.csv", index=False)
    from nnx import NNTabularDataset
    from nnx.data_splits import SplitManifest, plan_split
    from nnx.provenance import hash_file

    source = hash_file("rows.csv")
    plan = plan_split(df["row_id"], strategy="group", groups=df["patient"],
                      proportions=(0.7, 0.15, 0.15), seed=7, source=source)
    plan.save("split.json")
    dataset = NNTabularDataset(df=df, feature_cols=["age", "income"], target_col="label",
                               split=SplitManifest.load("split.json"), id_col="row_id",
                               source_identity=source)
    assert dataset.state()["split"] == plan.digest()
    assert sum(len(xb) for xb, _ in dataset.train_loader) == len(plan.train)
    assert dataset.input_dim == 2


def test_ids_come_from_id_col_never_from_the_index():
    df = _frame()
    plan = _group_plan(df)
    # An index holding the same ids, reversed: reading it would place every row wrongly.
    misleading = df.set_axis(list(reversed(df["row_id"])), axis=0)
    ds = _dataset(misleading, plan)
    assert _ages(ds.train_loader) == _planned_ages(df, plan.train)
    assert _ages(ds.val_loader) == _planned_ages(df, plan.val)


def test_gap_rows_are_not_counted_and_a_standardizer_fits_the_admitted_training_rows():
    """Excluded rows are dropped before any position is taken: n_rows counts the admitted
    rows, and standardize=True reads training rows by position among them (iloc), also in
    a shuffled frame whose index labels are no longer positions."""
    df = _frame(12).assign(t=list(range(12)))
    plan = plan_split(df["row_id"], strategy="chronological", times=df["t"], cutoffs=(6, 9),
                      gap=2)
    assert len(plan.excluded) == 4
    shuffled = df.sample(frac=1.0, random_state=1)
    ds = _dataset(shuffled, plan, standardize=True)
    assert ds.state()["n_rows"] == 8
    train_ages = torch.tensor(sorted(_planned_ages(df, plan.train)), dtype=torch.float64)
    assert ds.standardizer.mean == (float(train_ages.mean()),)
    assert ds.standardizer.n_rows == len(plan.train)
