"""A bundle carries the fitted preprocessing its model was trained with (spec §13.4,
§22; issue 36 item 20): ``export_bundle(..., preprocessing=standardizer)`` ships its
state as preprocessing.json, digest-checked like every payload; reconstruct_bundle
restores it and the rebuilt model's predict standardizes raw rows exactly once."""

from __future__ import annotations

import json

import pytest
import torch
from _support.bundles import batches, live_generation, model, params, rewrite, rewrite_state, state

from nnx.bundles import (
    BundleExportError,
    BundleValidationError,
    export_bundle,
    inspect_bundle,
    reconstruct_bundle,
    validate_bundle,
)
from nnx.preprocessing import Standardizer


def _raw(seed: int = 3, n: int = 8) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 3, generator=g) * torch.tensor([10.0, 0.5, 3.0]) + 7.0


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run trained on standardized features, and the standardizer fitted for it."""
    root = tmp_path_factory.mktemp("runs")
    raw = _raw(seed=0, n=12)
    standardizer = Standardizer.fit(raw, rows=range(12))
    targets = [y for _, y in batches()]
    data = [(standardizer.transform(raw[:6]), targets[0]),
            (standardizer.transform(raw[6:]), targets[1])]
    source = model()
    run = source.train(params(1, data), verbose=False, root=root)
    return run, root, source, standardizer


def _listing(path):
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


def test_the_rebuilt_models_predict_standardizes_raw_rows_once(trained, tmp_path):
    run, root, source, standardizer = trained
    info = export_bundle(run.id, tmp_path / "b", preprocessing=standardizer, root=root)
    assert info.preprocessing == {"file": "preprocessing.json", "columns": [0, 1, 2],
                                  "digest": standardizer.digest()}
    assert "/preprocessing.json" in " ".join(info.files)
    assert inspect_bundle(tmp_path / "b").preprocessing["file"] == "preprocessing.json"
    rebuilt = reconstruct_bundle(tmp_path / "b")
    assert rebuilt.preprocessing == standardizer
    assert rebuilt.model.preprocessing == standardizer
    raw = _raw()
    expected = source.predict(standardizer.transform(raw)).logits
    assert torch.equal(rebuilt.model.predict(raw).logits, expected)
    assert torch.equal(rebuilt.model.predict(raw.numpy()).logits, expected)
    # A loader holds prepared batches, as training read them: passed through untouched.
    prepared = [(standardizer.transform(raw), torch.zeros(8, dtype=torch.long))]
    assert torch.equal(rebuilt.model.predict(prepared).logits, expected)


def test_a_dataframe_of_raw_rows_is_standardized_by_column_name(tmp_path):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(_raw(seed=0, n=12).numpy(), columns=["a", "b", "c"])
    standardizer = Standardizer.fit(frame, rows=range(12), columns=["a", "b", "c"])
    run = model().train(params(1), verbose=False, root=tmp_path / "runs")
    export_bundle(run.id, tmp_path / "b", preprocessing=standardizer, root=tmp_path / "runs")
    rebuilt = reconstruct_bundle(tmp_path / "b")
    rows = frame.iloc[:4].assign(note="not a feature")  # other columns are ignored
    expected = rebuilt.model.predict(torch.tensor(frame.iloc[:4].to_numpy())).logits
    assert torch.equal(rebuilt.model.predict(rows).logits, expected)
    from nnx.preprocessing import PreprocessingError

    with pytest.raises(PreprocessingError):  # reordered columns: refused, as transform does
        rebuilt.model.predict(frame.iloc[:4][["c", "a", "b"]])


def test_a_bundle_without_preprocessing_rebuilds_a_plain_nnmodel(trained, tmp_path):
    from nnx import NNModel

    run, root, _, _ = trained
    info = export_bundle(run.id, tmp_path / "b", root=root)
    rebuilt = reconstruct_bundle(tmp_path / "b")
    assert info.preprocessing is None and rebuilt.preprocessing is None
    assert type(rebuilt.model) is NNModel
    assert "preprocessing" not in state(tmp_path / "b")


@pytest.mark.parametrize(("given", "match"), [
    (lambda x: x, "a function is a runtime transform"),
    (Standardizer.fit(torch.randn(5, 2), rows=range(5)), "standardizes 2 columns, the "
                                                         "bundled net takes 3 inputs"),
])
def test_a_preprocessing_a_bundle_cannot_carry_is_refused_before_writing(trained, tmp_path,
                                                                        given, match):
    run, root, _, standardizer = trained
    with pytest.raises(BundleExportError, match=match):
        export_bundle(run.id, tmp_path / "new", preprocessing=given, root=root)
    assert not (tmp_path / "new").exists()
    export_bundle(run.id, tmp_path / "b", preprocessing=standardizer, root=root)
    before = _listing(tmp_path / "b")
    with pytest.raises(BundleExportError, match=match):
        export_bundle(run.id, tmp_path / "b", preprocessing=given, root=root)
    assert _listing(tmp_path / "b") == before


def _tamper_scale(bundle):
    record = json.loads((live_generation(bundle) / "preprocessing.json").read_text())
    record["scale"][0] = 0.0
    rewrite(bundle, "preprocessing.json", json.dumps(record).encode())


def _tamper_unnamed(bundle):
    document = state(bundle)
    del document["preprocessing"]
    rewrite_state(bundle, document)


def _tamper_duplicate_key(bundle):
    text = (live_generation(bundle) / "preprocessing.json").read_text()
    rewrite(bundle, "preprocessing.json", text.replace("{", '{"kind": "x", ', 1).encode())


def _tamper_bytes(bundle):
    path = live_generation(bundle) / "preprocessing.json"
    path.write_text(path.read_text().replace("standardizer", "Standardizer"))


@pytest.mark.parametrize(("tamper", "match"), [
    (_tamper_scale, "not a fitted standardizer's state: scale of column 0 must be > 0"),
    (_tamper_unnamed, "does not name preprocessing.json, the manifest lists it"),
    (_tamper_duplicate_key, "repeats the key 'kind'"),
    (_tamper_bytes, "SHA-256 does not match the manifest"),
])
def test_a_tampered_preprocessing_is_refused_before_anything_is_built(trained, tmp_path,
                                                                      tamper, match):
    run, root, _, standardizer = trained
    export_bundle(run.id, tmp_path / "b", preprocessing=standardizer, root=root)
    tamper(tmp_path / "b")
    with pytest.raises(BundleValidationError, match=match):
        validate_bundle(tmp_path / "b")
    with pytest.raises(BundleValidationError, match=match):
        reconstruct_bundle(tmp_path / "b")


def test_a_resume_bundle_with_preprocessing_still_resumes(trained, tmp_path):
    run, root, _, standardizer = trained
    export_bundle(run.id, tmp_path / "b", preprocessing=standardizer, root=root)
    rebuilt = reconstruct_bundle(tmp_path / "b")
    resumed = rebuilt.resume(params(1), verbose=False, root=tmp_path / "c")
    assert resumed.id is not None
