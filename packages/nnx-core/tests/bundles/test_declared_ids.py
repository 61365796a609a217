"""A calibrator's declared model id must name the exported run (spec §18 model ids, §22;
issue 36 item 22): ``run.id`` or ``f"{run.id}:<checkpoint>"`` of the exported
checkpoint, else the bundled weights' fingerprint. One declared for another model is
refused at export before anything is written, and at every validation."""

from __future__ import annotations

import json

import pytest
from _support.bundles import StandInCalibrator, rewrite, train

from nnx.bundles import BundleExportError, BundleValidationError, export_bundle, validate_bundle

LABELS = ["a", "b", "c"]


@pytest.fixture(scope="module")
def run_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return train(root, n_epochs=1), root


def _export(run_root, target, model_id, checkpoint="last"):
    run, root = run_root
    return export_bundle(run.id, target, checkpoint=checkpoint, labels=LABELS, root=root,
                         calibrators=[StandInCalibrator(LABELS, model_id)])


@pytest.mark.parametrize(("declared", "checkpoint"), [
    ("{run}", "last"), ("{run}:LAST", "last"), ("{run}:last", "last"), ("{run}:BEST", "best"),
])
def test_an_id_naming_the_exported_run_and_checkpoint_is_kept(run_root, tmp_path, declared,
                                                               checkpoint):
    run, _ = run_root
    model_id = declared.format(run=run.id)
    info = _export(run_root, tmp_path / "b", model_id, checkpoint)
    assert info.calibrators[0]["model_id"] == model_id


@pytest.mark.parametrize("declared", [
    "some-other-run:BEST", "{run}x", "{run}:BEST", "sha256:short", "{other}",
])
def test_an_id_declared_for_another_model_is_refused_before_writing(run_root, tmp_path,
                                                                    declared):
    run, _ = run_root
    model_id = declared.format(run=run.id, other="0" * len(run.id))
    existing = tmp_path / "b"
    _export(run_root, existing, None)
    before = {p: p.read_bytes() for p in existing.rglob("*") if p.is_file()}
    with pytest.raises(BundleExportError, match=r"calibrators\[0\] is declared for model"):
        _export(run_root, existing, model_id)
    assert {p: p.read_bytes() for p in existing.rglob("*") if p.is_file()} == before
    with pytest.raises(BundleExportError, match="declared for model"):
        _export(run_root, tmp_path / "new", model_id)
    assert not (tmp_path / "new").exists()


def test_a_calibrator_rewritten_to_another_declared_id_is_refused_at_validation(run_root,
                                                                                tmp_path):
    run, _ = run_root
    good = StandInCalibrator(LABELS, f"{run.id}:LAST")
    _export(run_root, tmp_path / "b", good.model_id)
    record = good.to_json()
    record["model_id"] = "another-run:LAST"
    rewrite(tmp_path / "b", "calibrator-0.json", json.dumps(record).encode())
    with pytest.raises(BundleValidationError, match="declared for model 'another-run:LAST'"):
        validate_bundle(tmp_path / "b")
