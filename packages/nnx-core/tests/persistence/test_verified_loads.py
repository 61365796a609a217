"""Loaders verify (issues 8 and 9): NNCheckpoint.from_file / load / load_with_training_state
/ load_training_state / load_optimizer_state and NNModel.from_checkpoint decode only bytes
the checkpoint's manifest vouches for, read once; ``verify=False`` reads a damaged point
for forensics; a checkpoint without a manifest loads as before; every failure names the
file, on one line. A refused load writes nothing and changes no model."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from nnx import (
    CheckpointReadError,
    ModelCheckpoint,
    NNCheckpoint,
    NNModel,
    NNParams,
    NNTrainParams,
    ResumePointError,
)
from nnx._persistence.point_manifest import manifest_path


def _trained(root: Path, callbacks: list | None = None):
    torch.manual_seed(0)
    batches = [(torch.randn(6, 3), torch.randint(0, 2, (6,))) for _ in range(2)]
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(4,)))
    run = model.train(NNTrainParams(n_epochs=2, train_loader=batches, val_loader=batches),
                      callbacks=callbacks or [], verbose=False, root=root)
    return run, model


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def _flip_in_tensor(path: Path, tensor: torch.Tensor) -> None:
    """Flip one bit inside ``tensor``'s stored bytes (torch and safetensors store them raw)."""
    data = bytearray(path.read_bytes())
    at = bytes(data).find(tensor.detach().contiguous().numpy().tobytes())
    assert at > 0
    data[at + 1] ^= 0x10
    path.write_bytes(bytes(data))


def _one_line_naming(error: BaseException, path: Path) -> None:
    message = str(error)
    assert path.as_posix() in message and "\n" not in message


def test_a_healthy_point_loads_verified_by_its_manifest(tmp_path):
    run, model = _trained(tmp_path)
    checkpoint = NNCheckpoint.load(run.id, "last", root=tmp_path)
    live = NNCheckpoint.resume_point(run.id, "last", root=tmp_path)
    assert checkpoint.verified == live and checkpoint.verified.staged is False
    for key, value in model.net.state_dict().items():
        assert torch.equal(checkpoint.state_dict[key], value)
    checkpoint, state = NNCheckpoint.load_with_training_state(run.id, "last", root=tmp_path)
    assert state is not None and state["generation"] == checkpoint.generation
    optimizer = NNCheckpoint.load_optimizer_state(run.id, "last", root=tmp_path)
    assert optimizer["param_groups"] == state["optimizer"]["param_groups"]
    assert NNCheckpoint.load(run.id, "last", root=tmp_path, verify=False).verified is None


def test_an_altered_tensor_is_refused_by_every_loader_and_read_with_verify_false(tmp_path):
    run, model = _trained(tmp_path)
    ckdir = run.checkpoints_dir
    last = ckdir / "last.pt"
    weight = model.net.state_dict()["layers.0.weight"]
    _flip_in_tensor(last, weight)
    before = _files(ckdir)
    loads = [
        lambda: NNCheckpoint.load(run.id, "last", root=tmp_path),
        lambda: NNCheckpoint.from_file(last),
        lambda: NNCheckpoint.load_with_training_state(run.id, "last", root=tmp_path),
        lambda: NNCheckpoint.load_training_state(run.id, "last", root=tmp_path),
        lambda: NNCheckpoint.load_optimizer_state(run.id, "last", root=tmp_path),
        lambda: NNModel.from_checkpoint(last),
    ]
    for load in loads:
        with pytest.raises(ResumePointError, match=r"^corrupted resume point: .*last\.pt: "
                           r"checkpoint last\.pt does not match its SHA-256") as info:
            load()
        assert info.value.kind == "corrupted" and info.value.path == last
        _one_line_naming(info.value, last)
    assert _files(ckdir) == before  # nothing written, nothing repaired
    forensic = NNCheckpoint.load(run.id, "last", root=tmp_path, verify=False)
    assert not torch.equal(forensic.state_dict["layers.0.weight"], weight)  # the altered bytes
    assert forensic.verified is None


def test_an_altered_sidecar_is_refused_when_the_training_state_is_read(tmp_path):
    run, _ = _trained(tmp_path)
    checkpoint = NNCheckpoint.load(run.id, "last", root=tmp_path)
    side = run.checkpoints_dir / checkpoint.sidecar
    data = bytearray(side.read_bytes())
    data[len(data) // 2] ^= 0x01
    side.write_bytes(bytes(data))
    before = _files(run.checkpoints_dir)
    assert NNCheckpoint.load(run.id, "last", root=tmp_path).epoch == 1  # the weights are intact
    for load in (NNCheckpoint.load_training_state, NNCheckpoint.load_with_training_state,
                 NNCheckpoint.load_optimizer_state):
        with pytest.raises(ResumePointError, match=rf"sidecar {checkpoint.sidecar} does not "
                           "match its SHA-256") as info:
            load(run.id, "last", root=tmp_path)
        _one_line_naming(info.value, run.checkpoints_dir / "last.pt")
    assert _files(run.checkpoints_dir) == before
    assert NNCheckpoint.load_training_state(run.id, "last", root=tmp_path, verify=False) is not None


def test_a_safetensors_snapshot_is_verified_too(tmp_path):
    run, model = _trained(tmp_path, [ModelCheckpoint(prefix="snap", format="safetensors")])
    snapshot = run.checkpoints_dir / "snap_e1.safetensors"
    assert NNCheckpoint.load(run.id, "snap_e1", root=tmp_path).verified is not None
    _flip_in_tensor(snapshot, model.net.state_dict()["layers.1.weight"])
    for load in (lambda: NNCheckpoint.load(run.id, "snap_e1.safetensors", root=tmp_path),
                 lambda: NNModel.from_checkpoint(snapshot)):
        with pytest.raises(ResumePointError, match=r"snap_e1\.safetensors does not match"):
            load()
    assert NNCheckpoint.from_file(snapshot, verify=False).epoch == 1


def test_a_truncated_point_is_corrupted_and_a_truncated_copy_is_named(tmp_path):
    run, _ = _trained(tmp_path)
    last = run.checkpoints_dir / "last.pt"
    copy = tmp_path / "elsewhere" / "model.pt"
    copy.parent.mkdir()
    copy.write_bytes(last.read_bytes()[:200])
    last.write_bytes(last.read_bytes()[:200])
    with pytest.raises(ResumePointError, match="corrupted"):
        NNCheckpoint.from_file(last)
    for load in (lambda: NNCheckpoint.from_file(copy), lambda: NNModel.from_checkpoint(copy),
                 lambda: NNCheckpoint.from_file(last, verify=False)):
        with pytest.raises(CheckpointReadError) as info:
            load()
        assert isinstance(info.value, ValueError) and "RuntimeError" in info.value.reason
        _one_line_naming(info.value, info.value.path)
    assert sorted(p.name for p in copy.parent.iterdir()) == ["model.pt"]  # no lock, no temp


@pytest.mark.parametrize(("content", "reason"), [
    (b"", r"empty file \(0 bytes\)"),
    (b"not a checkpoint at all", "UnpicklingError|RuntimeError"),
])
def test_garbage_without_a_manifest_is_named(tmp_path, content, reason):
    path = tmp_path / "model.pt"
    path.write_bytes(content)
    with pytest.raises(CheckpointReadError, match=rf"^cannot read checkpoint "
                       rf"{path.as_posix()}: ({reason})"):
        NNCheckpoint.from_file(path)


def test_a_payload_that_is_not_an_nnx_checkpoint_is_named(tmp_path):
    path = tmp_path / "weights.pt"
    torch.save({"layers.0.weight": torch.zeros(2)}, path)
    with pytest.raises(CheckpointReadError, match=r"weights\.pt: it is not an NNx checkpoint"):
        NNCheckpoint.from_file(path)
    from safetensors.torch import save_file

    bare = tmp_path / "weights.safetensors"
    save_file({"w": torch.zeros(2)}, bare)
    with pytest.raises(CheckpointReadError, match="without NNx checkpoint metadata"):
        NNCheckpoint.from_file(bare)


def test_a_checkpoint_without_a_manifest_loads_as_before(tmp_path):
    run, _ = _trained(tmp_path)
    copy = tmp_path / "deployed" / "best.pt"
    copy.parent.mkdir()
    shutil.copy(run.checkpoints_dir / "best.pt", copy)
    loaded = NNCheckpoint.from_file(copy)
    assert loaded.verified is None and loaded.tag == "best"
    assert sorted(p.name for p in copy.parent.iterdir()) == ["best.pt"]
    rebuilt = NNModel.from_checkpoint(copy)
    for key, value in loaded.state_dict.items():
        assert torch.equal(rebuilt.net.state_dict()[key], value)
    # In the run, a point whose manifest is gone loads unverified too; resume refuses it.
    manifest_path(run.checkpoints_dir / "last.pt").unlink()
    assert NNCheckpoint.load(run.id, "last", root=tmp_path).verified is None
    with pytest.raises(ResumePointError, match="torn"):
        NNCheckpoint.verify(run.id, "last", root=tmp_path)


def test_a_staged_manifest_that_matches_vouches_for_the_load(tmp_path):
    run, _ = _trained(tmp_path)
    last = run.checkpoints_dir / "last.pt"
    live = manifest_path(last)
    live.rename(live.with_name(live.name + ".staged"))  # a writer died inside the publish window
    checkpoint = NNCheckpoint.load(run.id, "last", root=tmp_path)
    assert checkpoint.verified is not None and checkpoint.verified.staged is True
    assert NNCheckpoint.load_training_state(run.id, "last", root=tmp_path) is not None


def test_a_safetensors_map_location_it_cannot_honour_is_refused_before_reading(tmp_path):
    run, _ = _trained(tmp_path, [ModelCheckpoint(prefix="snap", format="safetensors")])
    with pytest.raises(TypeError, match=r"device string or torch\.device"):
        NNCheckpoint.load(run.id, "snap_e1", root=tmp_path, map_location=lambda s, _: s)
