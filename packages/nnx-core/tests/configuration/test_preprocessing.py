"""nnx.preprocessing (spec §13.4): train-only statistics, the declared schema, reloads."""

from __future__ import annotations

import json
import math
import pickle
from typing import Any

import numpy as np
import pytest
import torch

from nnx import NNModel, NNModelParams, NNParams
from nnx.preprocessing import FORMAT, PreprocessingError, Standardizer
from nnx.provenance import ExperimentManifest, declared, hash_bytes

pd = pytest.importorskip("pandas")  # the tabular extra; the fit itself needs no pandas

TRAIN = (0, 1, 2, 3, 4, 5, 6, 7)
MAX = float(np.finfo(np.float64).max)


class TrainOnly:
    """A row-indexable source that fails on any row outside the training membership."""

    def __init__(self, rows: list[list[float]], allowed: tuple[int, ...]) -> None:
        self.rows, self.allowed, self.read = rows, set(allowed), []

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> list[float]:
        if i not in self.allowed:
            raise AssertionError(f"held-out row {i} was read")
        self.read.append(i)
        return self.rows[i]


def frame() -> pd.DataFrame:
    """Eight training rows with exact statistics, then two held-out rows."""
    return pd.DataFrame({
        "name": [f"r{i}" for i in range(10)],
        "a": [2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0, 1e6, -3.0],
        "b": [0.1] * 8 + [50.0, 60.0],
        "c": [1, 3, 1, 3, 1, 3, 1, 3, 7, 9],
    })


def fitted(**kw: Any) -> Standardizer:
    return Standardizer.fit(frame(), rows=TRAIN, columns=["a", "b", "c"], **kw)


# -- the fit ----------------------------------------------------------------------------

def test_the_fit_reads_no_held_out_row():
    rows = frame()[["a", "b", "c"]].to_numpy().tolist()
    train = (1, 3, 4, 6)
    source = TrainOnly(rows, train)
    s = Standardizer.fit(source, rows=train)
    assert sorted(source.read) == list(train)
    expected = Standardizer.fit(frame(), rows=train, columns=["a", "b", "c"])
    assert s.mean == expected.mean and s.scale == expected.scale
    assert s.columns == [0, 1, 2]


def test_a_non_finite_held_out_row_does_not_stop_the_fit():
    df = frame()
    df.loc[9, "a"] = float("nan")
    assert fitted() == Standardizer.fit(df, rows=TRAIN, columns=["a", "b", "c"])
    with pytest.raises(PreprocessingError, match=r"'a'.*non-finite"):
        Standardizer.fit(df, rows=(*TRAIN, 9), columns=["a", "b", "c"])


def test_a_dataframe_is_read_by_position_through_iloc_never_by_index_label():
    df = frame()
    relabelled = df.set_axis(list(range(9, -1, -1)), axis=0)  # label 9 sits at position 0
    s = Standardizer.fit(relabelled, rows=TRAIN, columns=["a", "b", "c"])
    assert (s.mean, s.scale) == (fitted().mean, fitted().scale)


def test_the_fit_declares_the_column_order_and_transform_then_requires_it():
    s = Standardizer.fit(frame(), rows=TRAIN, columns=["c", "a"])
    assert s.columns == ["c", "a"] and s.mean == (2.0, 5.0)
    assert torch.equal(s.transform(frame()[["c", "a"]]), s.transform(frame()[["c", "b", "a"]]))
    with pytest.raises(PreprocessingError, match="order"):
        s.transform(frame())


def test_tensor_and_array_sources_are_read_by_index_with_the_same_statistics():
    matrix = frame()[["a", "b", "c"]].to_numpy()
    listed = torch.tensor(matrix.tolist(), dtype=torch.float64)
    for source in (matrix, torch.from_numpy(matrix), listed):
        s = Standardizer.fit(source, rows=list(TRAIN), columns=["a", "b", "c"])
        assert (s.mean, s.scale) == (fitted().mean, fitted().scale)


def test_statistics_do_not_depend_on_the_order_of_the_training_rows():
    g = np.random.default_rng(0)
    data = g.normal(size=(200, 3)) * np.array([1e-3, 1.0, 1e6])
    rows = list(range(150))
    first = Standardizer.fit(data, rows=rows)
    again = Standardizer.fit(data, rows=list(g.permutation(rows)))
    assert first == again and first.digest() == again.digest()


def test_fit_membership_defaults_to_a_digest_of_the_positions():
    s = fitted()
    assert s.membership["identity"] == "digest"
    assert Standardizer.fit(frame(), rows=TRAIN[::-1], columns=["a", "b", "c"]) == s
    assert Standardizer.fit(frame(), rows=pd.Index(TRAIN), columns=["a", "b", "c"]) == s
    assert Standardizer.fit(frame(), rows=np.array(TRAIN), columns=["a", "b", "c"]) == s
    other = Standardizer.fit(frame(), rows=(*TRAIN[:-1], 8), columns=["a"]).membership
    assert other != s.membership
    named = fitted(membership="train-2024-06")
    assert named.membership == {"identity": "declared", "value": "train-2024-06"}
    ref = hash_bytes(b"split")
    assert fitted(membership=ref).membership == ref.state()
    assert fitted(membership=declared("x")).membership == {"identity": "declared", "value": "x"}

    class Plan:  # what a SplitManifest offers: digest()
        def digest(self) -> str:
            return "ab" * 32

    assert fitted(membership=Plan()).membership == {"identity": "digest", "value": "ab" * 32}
    assert named.digest() != s.digest()  # the digest covers the membership


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"rows": []}, "empty"),
    ({"rows": [0, 1, 1]}, "repeats"),
    ({"rows": [0, -1]}, "non-negative"),
    ({"rows": [0.0, 1.0]}, "integer"),
    ({"rows": [True, False]}, "integer"),
    ({"rows": torch.tensor([0.0, 1.0])}, "integer"),
    ({"rows": [0, 10]}, "position 10 but the source has 10 rows"),
    ({"rows": TRAIN, "columns": ["a", "name"]}, "'name' must be numeric"),
    ({"rows": TRAIN, "columns": ["a", "zz"]}, "lacks the fitted column"),
    ({"rows": TRAIN, "columns": None}, "columns is required"),
    ({"rows": TRAIN, "columns": ["a", "a"]}, "repeat"),
    ({"rows": TRAIN, "columns": ["a", True]}, "str or int"),
    ({"rows": TRAIN, "columns": ["a"], "dtype": torch.int64}, "dtype"),
    ({"rows": TRAIN, "columns": ["a"], "membership": 3}, "membership"),
])
def test_fit_refusals_raise_before_anything_is_read(kwargs, match):
    df = frame()
    before = df.copy()
    with pytest.raises(PreprocessingError, match=match):
        Standardizer.fit(df, **kwargs)
    pd.testing.assert_frame_equal(df, before)


def test_a_rows_range_check_reads_no_row():
    source = TrainOnly([[1.0], [2.0]], allowed=())
    with pytest.raises(PreprocessingError, match="position 5"):
        Standardizer.fit(source, rows=[0, 5])
    assert source.read == []


def test_extreme_magnitudes_keep_a_positive_finite_scale():
    huge = Standardizer.fit(np.array([[1e300], [-1e300]]), rows=[0, 1])
    assert huge.mean == (0.0,) and huge.scale == (1e300,)  # 1e300 squared would overflow
    tiny = Standardizer.fit(np.array([[0.0], [4e-320]]), rows=[0, 1])
    assert tiny.scale[0] > 0 and math.isfinite(tiny.scale[0])
    top = Standardizer.fit(np.array([[-MAX], [MAX]]), rows=[0, 1])  # x - mean reaches 2*MAX
    assert top.mean == (0.0,) and top.scale == (MAX,)


NEAR_MAX = [  # finite columns near the float64 maximum, with their exact statistics
    ([1.7e308, 1.6e308, 1.5e308], 1.6e308, math.sqrt(2 / 3) * 1e307),
    ([1.7e308, -1.7e308, 1.0, 0.0], 0.25, 1.7e308 / math.sqrt(2)),
    ([1.7e308, 1.7e308, 1e308], 1.7e308 - 0.7e308 / 3, math.sqrt(2) * 0.7e308 / 3),
    ([-1.7e308, 1.7e308, 1.7e308, 1.7e308], 0.85e308, math.sqrt(3) * 0.85e308),
]


@pytest.mark.parametrize(("values", "mean", "scale"), NEAR_MAX)
def test_values_near_the_float64_maximum_give_finite_correct_statistics(values, mean, scale,
                                                                         tmp_path):
    data = pd.DataFrame({"big": values, "small": range(len(values))})
    s = Standardizer.fit(data, rows=range(len(values)), columns=["big", "small"],
                         dtype=torch.float64)
    assert s.mean[0] == pytest.approx(mean, rel=1e-14)
    assert s.scale[0] == pytest.approx(scale, rel=1e-14)
    assert s.mean[1] == (len(values) - 1) / 2  # the ordinary column is computed as before
    out = s.transform(data)  # x - mean may pass the maximum; the standardized value does not
    assert bool(torch.isfinite(out).all())
    assert float(out[:, 0].mean()) == pytest.approx(0.0, abs=1e-12)
    assert float(out[:, 0].pow(2).mean()) == pytest.approx(1.0, rel=1e-12)
    s.save(tmp_path / "std.json")  # still float64-exact through its JSON
    again = Standardizer.load(tmp_path / "std.json")
    assert [m.hex() for m in again.mean] == [m.hex() for m in s.mean]
    assert [v.hex() for v in again.scale] == [v.hex() for v in s.scale]
    assert torch.equal(again.transform(data), out)


# -- transform and its schema -----------------------------------------------------------

def test_a_single_row_gives_exactly_its_batch_result():
    g = np.random.default_rng(1)
    data = pd.DataFrame(g.normal(size=(40, 4)) * 1e3 + 0.3, columns=["w", "x", "y", "z"])
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        s = Standardizer.fit(data, rows=range(30), columns=["w", "x", "y", "z"], dtype=dtype)
        batch = s.transform(data)
        array = data.to_numpy().copy()
        for i in range(40):
            for row in (data.iloc[i], array[i], torch.from_numpy(array[i]), list(array[i])):
                one = s(row)
                assert one.shape == (4,) and one.dtype == dtype
                assert torch.equal(one, batch[i])
        assert torch.equal(s(array), batch) and torch.equal(s(torch.from_numpy(array)), batch)


def test_other_dataframe_columns_are_ignored_and_a_series_is_checked_by_name():
    s = fitted()
    df = frame()
    assert torch.equal(s.transform(df), s.transform(df[["a", "b", "c"]]))
    row = df.iloc[2]  # object dtype: "name" is a string column
    assert torch.equal(s(row), s.transform(df)[2])
    with pytest.raises(PreprocessingError, match="order"):
        s(row[["c", "b", "a"]])


def bad_inputs() -> list[tuple[str, Any, str]]:
    df = frame()
    nan = df.copy()
    nan.loc[4, "b"] = float("nan")
    text = df.assign(b=df["b"].astype(str))
    return [
        ("missing column", df.drop(columns="b"), "lacks the fitted column.*'b'"),
        ("reordered", df[["c", "a", "b"]], "order"),
        ("non-numeric", text, "'b' must be numeric"),
        ("nan", nan, "'b'.*non-finite.*row 4"),
        ("width", np.zeros((3, 2)), "3 columns"),
        ("row width", [1.0, 2.0], "3 columns"),
        ("inf tensor", torch.tensor([[1.0, float("inf"), 0.0]]), "non-finite"),
        ("strings", np.array([["a", "b", "c"]]), "real numbers"),
        ("list of str", [1.0, "x", 2.0], "real numbers"),
        ("3-D", torch.zeros(2, 2, 3), "3-D"),
        ("complex", torch.zeros(2, 3, dtype=torch.complex64), "real numbers"),
        ("series by name", df.iloc[0][["a", "c"]], "lacks the fitted column"),
        ("not data", object(), "cannot read"),
    ]


@pytest.mark.parametrize(("what", "data", "match"), bad_inputs(), ids=[b[0] for b in bad_inputs()])
def test_schema_refusals_raise_preprocessing_error_and_change_nothing(what, data, match):
    s = fitted()
    state = s.state()
    before = pickle.dumps(data)
    with pytest.raises(PreprocessingError, match=match):
        s.transform(data)
    assert s.state() == state
    assert pickle.dumps(data) == before  # the input is never modified


def test_overflowing_the_output_dtype_is_refused():
    s = Standardizer.fit(np.array([[0.0], [1.0]]), rows=[0, 1], dtype=torch.float16)
    with pytest.raises(PreprocessingError, match="overflow"):
        s.transform(np.array([[1e6]]))


# -- the state: JSON, digest, reload -----------------------------------------------------

def awkward() -> Standardizer:
    g = np.random.default_rng(7)
    data = g.normal(size=(64, 5)) * np.array([1e-300, 1e-8, 1.0, 1e8, 1e300]) + 1 / 3
    return Standardizer.fit(data, rows=range(0, 64, 2), columns=["p", "q", 3, 4, "t"],
                            dtype=torch.float64)


def test_reload_is_float64_exact_through_json_file_state_and_pickle(tmp_path):
    s = awkward()
    path = tmp_path / "std.json"
    s.save(path)
    assert json.loads(path.read_text())["format"] == FORMAT == "nnx.preprocessing/1"
    for again in (Standardizer.load(path), Standardizer.from_json(s.to_json()),
                  Standardizer.from_state(s.state()), pickle.loads(pickle.dumps(s))):
        assert [m.hex() for m in again.mean] == [m.hex() for m in s.mean]
        assert [v.hex() for v in again.scale] == [v.hex() for v in s.scale]
        assert again == s and again.digest() == s.digest()
        assert again.columns == ["p", "q", 3, 4, "t"] and again.dtype == torch.float64
        x = torch.randn(3, 5, dtype=torch.float64)
        assert torch.equal(again(x), s(x))


def test_the_state_is_primitive_json_and_the_digest_covers_it():
    s = fitted()
    state = s.state()
    assert state == json.loads(json.dumps(state))
    assert set(state) == {"format", "kind", "columns", "mean", "scale", "dtype", "n_rows",
                          "membership"}
    assert len(s.digest()) == 64
    changed = dict(state, scale=[2.0, 1.0, 2.0])
    assert Standardizer.from_state(changed).digest() != s.digest()
    with pytest.raises(AttributeError):
        s._mean = None  # type: ignore[misc]


def bad_states() -> list[tuple[str, Any, str]]:
    good = fitted().state()
    return [
        ("short mean", dict(good, mean=[5.0, 0.1]), "mean must hold one number per column"),
        ("long scale", dict(good, scale=[1.0] * 4), "scale must hold one number per column"),
        ("no columns", dict(good, columns=[], mean=[], scale=[]), "at least one column"),
        ("zero scale", dict(good, scale=[2.0, 0.0, 1.0]), "scale of column 'b' must be > 0"),
        ("negative scale", dict(good, scale=[-2.0, 1.0, 1.0]), "must be > 0"),
        ("nan", dict(good, mean=[float("nan"), 0.1, 2.0]), "finite"),
        ("inf", dict(good, scale=[2.0, float("inf"), 1.0]), "finite"),
        ("bool", dict(good, mean=[True, 0.1, 2.0]), "number"),
        ("string", dict(good, mean=["5", 0.1, 2.0]), "number"),
        ("format", dict(good, format="nnx.preprocessing/2"), "not a nnx.preprocessing/1"),
        ("kind", dict(good, kind="minmax"), "kind"),
        ("extra key", dict(good, extra=1), "exactly the keys"),
        ("dtype", dict(good, dtype="int8"), "dtype"),
        ("n_rows", dict(good, n_rows=0), "n_rows"),
        ("membership", dict(good, membership={"identity": "guess", "value": "x"}), "identity"),
        ("unknown with value", dict(good, membership={"identity": "unknown", "value": "x"}),
         "no value"),
    ]


@pytest.mark.parametrize(("what", "state", "match"), bad_states(),
                         ids=[b[0] for b in bad_states()])
def test_loading_a_bad_state_is_refused(what, state, match, tmp_path):
    with pytest.raises(PreprocessingError, match=match):
        Standardizer.from_state(state)
    if "nan" in what or "inf" in what:
        return  # strict JSON cannot even write these; the text tests below cover them
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(state))
    with pytest.raises(PreprocessingError, match=match):
        Standardizer.load(path)
    assert json.loads(path.read_text()) == state  # loading writes nothing


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_json_numbers_are_refused(number):
    text = fitted().to_json().replace('"scale": [\n    2.0', f'"scale": [\n    {number}')
    assert number in text
    with pytest.raises(PreprocessingError):
        Standardizer.from_json(text)


def test_a_constructed_standardizer_is_checked_like_a_loaded_one():
    with pytest.raises(PreprocessingError, match="> 0"):
        Standardizer(["a"], [0.0], [0.0], n_rows=1, membership="m")  # type: ignore[arg-type]


# -- provenance ---------------------------------------------------------------------------

def test_the_manifest_records_the_fitted_state_never_recomputed_statistics():
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(4,)),
                    params=NNModelParams())
    # Statistics no data produces: the manifest can only have copied them.
    state = dict(fitted().state(), mean=[0.25, -7.5, 1e-9], scale=[3.0, 0.5, 11.0])
    s = Standardizer.from_state(state)
    plan = ExperimentManifest.for_model(model, preprocessing=s)
    assert plan.preprocessing["state"]["mean"] == (0.25, -7.5, 1e-9)
    assert plan.preprocessing["state"]["scale"] == (3.0, 0.5, 11.0)
    assert plan.preprocessing["digest"] == {"identity": "digest", "value": s.digest()}
    reloaded = Standardizer.from_json(s.to_json())
    assert ExperimentManifest.for_model(model, preprocessing=reloaded) == plan
    again = ExperimentManifest.from_json(plan.to_json())
    assert again.fingerprint == plan.fingerprint
    refit = ExperimentManifest.for_model(model, preprocessing=fitted())
    assert refit.fingerprint != plan.fingerprint
    assert math.isfinite(plan.preprocessing["state"]["mean"][2])
