"""export_bundle (spec §22): which checkpoint, what it refuses before anything is
written, directory safety, and calibrators checked at export and at validation."""

from __future__ import annotations

import json
import os

import pytest
import torch
from _support.bundles import (
    StandInCalibrator,
    batches,
    model,
    params,
    rewrite,
    train,
)
from torch import nn

from nnx import (
    Losses,
    ModelCheckpoint,
    NNModel,
    NNModelParams,
    NNTrainParams,
    TransformRecipe,
    register_transform,
    unregister_transform,
)
from nnx._persistence.bundle_format import encode_value
from nnx.bundles import (
    BundleExportError,
    BundleValidationError,
    export_bundle,
    inspect_bundle,
    model_fingerprint,
    reconstruct_bundle,
    validate_bundle,
)
from nnx.models import MissingModelFactoryError


@pytest.fixture(scope="module")
def run_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return train(root), root


def _listing(path):
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else None


def test_a_train_checkpoint_gives_a_resume_bundle_and_a_snapshot_an_inference_one(tmp_path):
    run = model().train(params(2), callbacks=[ModelCheckpoint(prefix="snap")], verbose=False,
                        root=tmp_path / "runs")
    assert export_bundle(run.id, tmp_path / "a", root=tmp_path / "runs").capability == "resume"
    best = export_bundle(run.id, tmp_path / "b", checkpoint="best", root=tmp_path / "runs")
    assert (best.capability, best.source_checkpoint) == ("resume", "best")
    snap = export_bundle(run.id, tmp_path / "c", checkpoint="snap_e1", root=tmp_path / "runs")
    assert (snap.capability, snap.epoch, snap.components) == ("inference", 1, ())
    assert "training.safetensors" not in " ".join(snap.files)


def test_plain_data_only_no_pickle_fallback():
    seen = []

    def store(path, tensor):
        seen.append(path)
        return f"training:t{len(seen)}"

    value = {"a": (1, 2.0), "s": {0: {"step": torch.tensor(1.0)}}, "best": float("inf")}
    assert encode_value(value, "training", store) == {
        "a": {"$tuple": [1, 2.0]}, "s": {"$intdict": [[0, {"step": {"$tensor": "training:t1"}}]]},
        "best": {"$float": "inf"}}
    with pytest.raises(BundleExportError, match=r"training\.state\.dtype: a torch\.dtype"):
        encode_value({"state": {"dtype": torch.float32}}, "training", store)
    with pytest.raises(BundleExportError, match="would read as a typed value"):
        encode_value({"$tensor": "x"}, "training", store)


class _Odd:
    """A component whose state holds an object that is not plain data (a dtype)."""

    def component_spec(self):
        from nnx import ComponentSpec

        return ComponentSpec("test.odd", version=1, required=False)

    def component_state(self):
        return {"dtype": torch.float32}

    def load_component_state(self, state, *, version):
        pass


def test_a_custom_object_in_component_state_is_refused_before_writing(tmp_path):
    run = model().train(params(1), components=[_Odd()], verbose=False, root=tmp_path / "runs")
    with pytest.raises(BundleExportError, match=r"components\.test\.odd\.state\.dtype"):
        export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    assert not (tmp_path / "b").exists()


def test_non_tensor_module_extra_state_is_refused(run_root, tmp_path):
    # A module's get_extra_state may return any object, which a pickle checkpoint keeps
    # (training such a net today trips the live-topology check, so the checkpoint is
    # written directly, as a module with that extra state would have it).
    from nnx import NNCheckpoint

    run, root = run_root
    checkpoint = NNCheckpoint.load(run.id, "last", root=root)
    checkpoint.state_dict = {**checkpoint.state_dict, "layers.0._extra_state": {"note": "x"}}
    checkpoint.tag = "odd"
    checkpoint.save(root / run.id / "checkpoints" / "odd.pt")
    with pytest.raises(BundleExportError, match=r"non-tensor entries \['layers.0._extra_state'\]"):
        export_bundle(run.id, tmp_path / "b", checkpoint="odd", root=root)
    assert not (tmp_path / "b").exists()


def test_a_runtime_module_is_refused_like_other_portable_saves(tmp_path):
    wrapped = NNModel(module=nn.Linear(3, 3), params=NNModelParams(loss=Losses.CROSS_ENTROPY))
    run = wrapped.train(NNTrainParams(n_epochs=1, train_loader=batches()), verbose=False,
                        root=tmp_path / "runs")
    with pytest.raises(MissingModelFactoryError, match="runtime module"):
        export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    assert not (tmp_path / "b").exists()


def _identity_op(net, config, *, source):
    """A registered op that changes nothing (its recipe is all the test needs)."""


def test_a_transform_nnx_cannot_replay_is_refused_by_index_and_id(tmp_path):
    register_transform("test.gone", 1, _identity_op)
    try:
        m = model()
        m.apply_transform(TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"],
                                                               "rank": 2}))
        m.apply_transform(TransformRecipe("test.gone", 1, {}))
        run = m.train(params(1), verbose=False, root=tmp_path / "runs")
    finally:
        unregister_transform("test.gone", 1)
    with pytest.raises(BundleExportError, match=r"transforms\[1\] \(test\.gone\)"):
        export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    assert not (tmp_path / "b").exists()


def test_a_directory_that_is_neither_empty_nor_a_bundle_is_never_touched(run_root, tmp_path):
    run, root = run_root
    target = tmp_path / "mine"
    target.mkdir()
    (target / "thesis.tex").write_text("precious")
    with pytest.raises(BundleExportError, match="neither empty nor a run bundle"):
        export_bundle(run.id, target, root=root)
    assert _listing(target) == ["thesis.tex"]
    (target / "bundle.json").write_text("{not json")
    with pytest.raises(BundleExportError, match="not a readable NNx run bundle manifest"):
        export_bundle(run.id, target, root=root)
    assert (target / "bundle.json").read_text() == "{not json"
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(BundleExportError, match="not a directory"):
        export_bundle(run.id, afile, root=root)
    assert afile.read_text() == "x"


def test_an_empty_directory_is_a_valid_target(run_root, tmp_path):
    run, root = run_root
    (tmp_path / "empty").mkdir()
    assert export_bundle(run.id, tmp_path / "empty", root=root).source_run == run.id


def _fingerprint(run, root):
    from nnx import NNCheckpoint

    return model_fingerprint(NNCheckpoint.load(run.id, "last", root=root).state_dict)


def test_a_calibrator_ships_and_reconstructs(run_root, tmp_path):
    run, root = run_root
    calibrator = StandInCalibrator(["a", "b", "c"], _fingerprint(run, root))
    info = export_bundle(run.id, tmp_path / "b", calibrators=[calibrator],
                         labels=["a", "b", "c"], root=root)
    assert info.calibrators[0]["labels"] == ["a", "b", "c"]
    assert validate_bundle(tmp_path / "b").calibrators[0]["model_id"] == calibrator.model_id
    rebuilt = reconstruct_bundle(tmp_path / "b")
    assert rebuilt.calibrators[0]["temperature"] == 1.5  # no reader: the record, read-only
    with pytest.raises(TypeError):
        rebuilt.calibrators[0]["temperature"] = 2.0
    from nnx.bundles import register_calibrator_reader, unregister_calibrator_reader

    register_calibrator_reader("acme.temperature/1", StandInCalibrator.from_record)
    try:
        restored = reconstruct_bundle(tmp_path / "b").calibrators[0]
    finally:
        unregister_calibrator_reader("acme.temperature/1")
    assert isinstance(restored, StandInCalibrator)
    assert (restored.labels, restored.model_id) == (["a", "b", "c"], calibrator.model_id)
    declared = StandInCalibrator(["a", "b", "c"], f"{run.id}:LAST")  # a declared id is kept
    export_bundle(run.id, tmp_path / "b", calibrators=[declared], labels=["a", "b", "c"],
                  root=root)
    assert inspect_bundle(tmp_path / "b").calibrators[0]["file"] == "calibrator-0.json"


@pytest.mark.parametrize(("labels", "model_id", "count", "match"), [
    (["a", "b"], None, None, "calibrates 2 classes, the model has 3"),
    (["c", "b", "a"], None, None, "labels"),
    (["a", "b", "c"], "sha256:" + "0" * 64, None, "bound to model"),
    (["a", "b", "c"], None, 4, "reports 4 classes"),
])
def test_a_calibrator_of_another_model_is_refused_at_export(run_root, tmp_path, labels,
                                                            model_id, count, match):
    run, root = run_root
    bad = StandInCalibrator(labels, model_id, num_classes=count)
    with pytest.raises(BundleExportError, match=match):
        export_bundle(run.id, tmp_path / "b", calibrators=[bad], labels=["a", "b", "c"],
                      root=root)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(("field", "value", "match"), [
    ("labels", ["a", "b"], "calibrates 2 classes"),
    ("labels", ["b", "a", "c"], "labels"),
    ("model_id", "sha256:" + "1" * 64, "bound to model"),
])
def test_a_tampered_calibrator_is_refused_at_validation(run_root, tmp_path, field, value,
                                                        match):
    run, root = run_root
    good = StandInCalibrator(["a", "b", "c"], _fingerprint(run, root))
    export_bundle(run.id, tmp_path / "b", calibrators=[good], labels=["a", "b", "c"], root=root)
    record = good.to_json()
    record[field] = value
    rewrite(tmp_path / "b", "calibrator-0.json", json.dumps(record).encode())
    with pytest.raises(BundleValidationError, match=match):
        validate_bundle(tmp_path / "b")


def test_export_leaves_the_source_run_unchanged(run_root, tmp_path):
    run, root = run_root
    before = {p: os.stat(p).st_mtime_ns for p in (root / run.id).rglob("*") if p.is_file()
              and not p.name.endswith(".lock")}
    export_bundle(run.id, tmp_path / "b", root=root)
    after = {p: os.stat(p).st_mtime_ns for p in (root / run.id).rglob("*") if p.is_file()
             and not p.name.endswith(".lock")}
    assert before == after


def _odd_checkpoint(run, root, *, weight=None, optimizer=None):
    """Save run's last checkpoint again as tag "odd", with layers.0.weight replaced by
    ``weight(tensor)`` and the first parameter's optimizer state updated by ``optimizer``
    (as a checkpoint holding such values would have them)."""
    from nnx import NNCheckpoint

    checkpoint, training = NNCheckpoint.load_with_training_state(run.id, "last", root=root)
    if weight is not None:
        key = next(iter(checkpoint.state_dict))
        checkpoint.state_dict = {**checkpoint.state_dict,
                                 key: weight(checkpoint.state_dict[key])}
    if optimizer is not None:
        training["optimizer"]["state"][0].update(optimizer)
    checkpoint.tag = "odd"
    checkpoint.save(root / run.id / "checkpoints" / "odd.pt", training_state=training)
    return next(iter(checkpoint.state_dict))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.uint16, torch.float8_e4m3fn])
def test_a_weight_of_a_dtype_the_format_cannot_store_is_refused_by_name(tmp_path, dtype):
    root = tmp_path / "runs"
    run = train(root, n_epochs=1)
    key = _odd_checkpoint(run, root, weight=lambda t: t.to(dtype))
    with pytest.raises(BundleExportError, match=rf"weights\.{key}: the tensor has dtype "
                                                rf"{dtype}"):
        export_bundle(run.id, tmp_path / "b", checkpoint="odd", root=root)
    assert not (tmp_path / "b").exists()


def test_a_training_state_tensor_the_format_cannot_store_is_refused_by_path(tmp_path):
    root = tmp_path / "runs"
    run = train(root, n_epochs=1)
    _odd_checkpoint(run, root, optimizer={"exp_avg": torch.zeros(2, dtype=torch.complex64)})
    with pytest.raises(BundleExportError,
                       match=r"training\.optimizer\.state\[0\]\.exp_avg: the tensor has dtype "
                             r"torch\.complex64"):
        export_bundle(run.id, tmp_path / "b", checkpoint="odd", root=root)
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(("value", "kind"), [(torch.float32, r"torch\.dtype"),
                                           (torch.device("cpu"), r"torch\.device")])
def test_a_custom_object_in_optimizer_state_is_refused_before_writing(tmp_path, value, kind):
    # Objects a resume point reads back as data (the sidecar is never unpickled) but that
    # the bundle's JSON cannot hold.
    root = tmp_path / "runs"
    run = train(root, n_epochs=1)
    _odd_checkpoint(run, root, optimizer={"odd": value})
    with pytest.raises(BundleExportError, match=rf"training\.optimizer\.state\[0\]\.odd: a "
                                                rf"{kind} is not plain data"):
        export_bundle(run.id, tmp_path / "b", checkpoint="odd", root=root)
    assert not (tmp_path / "b").exists()
