"""nnx.extend.read_run_document / RunDocument: run.yaml and metadata.yaml through named
readers (issue 37), on documents core itself wrote, so a renamed key fails here."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nnx import Devices, MonitorSpec, NNModelParams, NNParams, NNRun, NNTrainParams
from nnx._persistence.resume_status import ResumeStatus
from nnx.extend import RunDocument, UnsafePathError, read_run_document, run_document_exists

NET = NNParams(input_dim=3, output_dim=2, hidden_dims=(4,))


def _saved(root, *, seed, salt=None, device=Devices.CPU, resume=None, **loop) -> RunDocument:
    run = NNRun(model_params=NNModelParams(device=device), net_params=NET, salt=salt,
                train_params=NNTrainParams(n_epochs=2, seed=seed, **loop), root=root)
    if resume is not None:
        run.metadata["resume"] = resume.state()
    run.save_config()
    assert run_document_exists(root, run.id)
    return read_run_document(root, run.id)


def test_the_readers_answer_what_core_wrote(tmp_path) -> None:
    monitor = MonitorSpec("loss")
    doc = _saved(tmp_path, seed=3, salt="r2", parent_run_id="p" * 32, parent_checkpoint="best",
                 monitor=monitor,
                 resume=ResumeStatus(mode="weights_only", source_checkpoint_id="ck-1"))
    assert (doc.seed, doc.init_seed) == (3, None)
    assert (doc.parent_run_id, doc.parent_checkpoint) == ("p" * 32, "best")
    assert MonitorSpec.from_state(doc.monitor) == monitor
    assert (doc.resume_mode, doc.source_checkpoint_id) == ("weights_only", "ck-1")
    assert doc.loop["n_epochs"] == 2


def test_a_fresh_run_has_no_parent_and_no_resume_record(tmp_path) -> None:
    doc = _saved(tmp_path, seed=None)
    assert doc.seed is None and doc.parent_run_id is None and doc.monitor is None
    assert doc.resume is None and doc.resume_mode is None and doc.source_checkpoint_id is None


def test_identity_config_drops_exactly_the_runtime_fields(tmp_path) -> None:
    one = _saved(tmp_path, seed=1, salt="a")
    two = _saved(tmp_path, seed=2, salt="b", device=Devices.CUDA)
    assert one.run_id != two.run_id
    assert one.identity_config() == two.identity_config()
    assert one.identity_config()["train"] == {
        k: v for k, v in one.config["train"].items() if k != "seed"}
    # The document itself is left as read.
    assert one.config["salt"] == "a" and one.config["train"]["seed"] == 1


def test_a_registered_model_specs_seed_is_the_init_seed_and_no_identity(tmp_path) -> None:
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "run.yaml").write_text(
        "model: {device: cpu, net: {kind: registered, name: m, seed: 7}}\ntrain: {seed: 3}\n")
    doc = read_run_document(tmp_path, "r")
    assert (doc.seed, doc.init_seed) == (3, 7)
    assert doc.identity_config() == {"model": {"net": {"kind": "registered", "name": "m"}},
                                     "train": {}}


def test_a_linked_run_yaml_is_refused(tmp_path) -> None:
    doc = _saved(tmp_path / "a", seed=0)
    (tmp_path / "b" / doc.run_id).mkdir(parents=True)
    (tmp_path / "b" / doc.run_id / "run.yaml").symlink_to(doc.path / "run.yaml")
    with pytest.raises(UnsafePathError):
        read_run_document(tmp_path / "b", doc.run_id)


def test_a_document_that_is_no_run_configuration_is_refused(tmp_path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "run.yaml").write_text("- 1\n")
    with pytest.raises(ValueError, match="not an NNx run configuration"):
        read_run_document(tmp_path, "x")


def test_the_readers_load_no_torch() -> None:
    code = ("import sys, nnx.extend as e; e.read_run_document; e.RunDocument; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
