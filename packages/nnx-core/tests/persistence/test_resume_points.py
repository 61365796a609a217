"""Resume points (spec §4.2, §14.3): manifests, generations, verification, probes."""

from __future__ import annotations

import json
import os
import shutil
import signal

import pytest
import torch

from nnx import NNCheckpoint, NNModel, NNParams, NNTrainParams
from nnx._foundation.atomic import interrupts_held
from nnx._persistence.point_manifest import ResumePointError, manifest_path


def trained(tmp_path, n_epochs=2):
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(4,)))
    batches = [(torch.randn(6, 3), torch.randint(0, 2, (6,))) for _ in range(2)]
    run = model.train(NNTrainParams(n_epochs=n_epochs, train_loader=batches,
                                    val_loader=batches), verbose=False, root=tmp_path)
    return run, batches


def snapshot(directory):
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


def test_a_point_is_a_checkpoint_its_generation_sidecar_and_a_manifest(tmp_path):
    run, _ = trained(tmp_path, n_epochs=3)
    point = NNCheckpoint.verify(run.id, "last", root=tmp_path)
    assert point is not None and point.generation == 3  # LAST was saved once per epoch
    assert point.position == {"completed_epoch": 2, "global_step": 6, "committed_updates": 6,
                              "planned_n_epochs": 3}
    names = {p.name for p in run.checkpoints_dir.iterdir()}
    assert {"last.pt", "last.pt.opt.3.pt", "last.pt.opt.pt", "last.pt.manifest.json",
            "last.pt.lock"} <= names
    assert "last.pt.opt.2.pt" not in names  # the previous generation is gone
    checkpoint = NNCheckpoint.load(run.id, "last", root=tmp_path)
    assert (checkpoint.generation, checkpoint.sidecar) == (3, "last.pt.opt.3.pt")
    assert NNCheckpoint.resume_point(run.id, "last", root=tmp_path) == point


@pytest.mark.parametrize(("damage", "kind"), [
    ("flip checkpoint byte", "corrupted"),
    ("flip sidecar byte", "corrupted"),
    ("delete sidecar", "torn"),
    ("truncate manifest", "torn"),
    # Another generation's bytes under this generation's name are only a digest mismatch:
    # telling which point they came from would mean unpickling them (verification never does).
    ("older sidecar", "corrupted"),
    ("manifest names an older sidecar", "mixed"),
    ("stale compatibility copy", "mixed"),
])
def test_damaged_points_are_refused_and_nothing_is_modified(tmp_path, damage, kind):
    run, batches = trained(tmp_path)
    ckdir = run.checkpoints_dir
    if damage == "older sidecar":
        older = (ckdir / "last.pt.opt.pt").read_bytes()  # generation 2, kept aside
        trained_again = torch.load(ckdir / "last.pt.opt.2.pt", weights_only=False)
        assert trained_again["generation"] == 2
        first = NNCheckpoint.load(run.id, "last", root=tmp_path)
        # Rewrite LAST as generation 3, then put generation 2's state under 3's name.
        first.save(ckdir / "last.pt", training_state={"generation": "x"})
        (ckdir / "last.pt.opt.3.pt").write_bytes(older)
    elif damage == "manifest names an older sidecar":
        shutil.copy(ckdir / "last.pt.opt.2.pt", ckdir / "last.pt.opt.1.pt")
        path = manifest_path(ckdir / "last.pt")
        doc = json.loads(path.read_text())
        doc["files"]["sidecar"]["name"] = "last.pt.opt.1.pt"
        path.write_text(json.dumps(doc))
    elif damage == "stale compatibility copy":
        compat = ckdir / "last.pt.opt.pt"
        compat.unlink()  # a hard link of the sidecar: writing through it would change both
        torch.save({"generation": 1}, compat)
    elif damage.startswith("flip"):
        target = ckdir / ("last.pt" if "checkpoint" in damage else "last.pt.opt.2.pt")
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0xFF
        target.write_bytes(bytes(data))
    elif damage == "delete sidecar":
        (ckdir / "last.pt.opt.2.pt").unlink()
    else:
        path = manifest_path(ckdir / "last.pt")
        path.write_bytes(path.read_bytes()[:20])
    before = snapshot(ckdir)
    runs_before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ResumePointError, match=kind) as info:
        NNCheckpoint.verify(run.id, "last", root=tmp_path)
    assert info.value.kind == kind
    # A resume refuses the same point before reserving anything.
    with pytest.raises(ResumePointError):
        NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(4,))).train(
            NNTrainParams(n_epochs=1, train_loader=batches, resume_from_run_id=run.id),
            verbose=False, root=tmp_path)
    after = snapshot(ckdir)
    after.pop("last.pt.lock", None), before.pop("last.pt.lock", None)
    assert after == before
    assert sorted(p.name for p in tmp_path.iterdir()) == runs_before


def test_a_writer_dead_inside_the_publish_window_leaves_a_staged_point_that_verifies(tmp_path):
    run, _ = trained(tmp_path)
    ckdir = run.checkpoints_dir
    live = manifest_path(ckdir / "last.pt")
    staged = live.with_name(live.name + ".staged")
    shutil.copy(live, staged)  # the new manifest, staged
    old = json.loads(live.read_text())
    old["generation"], old["checkpoint_id"] = 1, "0" * 32
    live.write_text(json.dumps(old))  # the live manifest still names the previous point
    point = NNCheckpoint.verify(run.id, "last", root=tmp_path)
    assert point is not None and point.staged and point.generation == 2


def test_probes_are_observational(tmp_path):
    missing = "f" * 32
    assert NNCheckpoint.load_training_state(missing, root=tmp_path) is None
    assert NNCheckpoint.load_optimizer_state(missing, root=tmp_path) is None
    assert NNCheckpoint.load_with_training_state(missing, root=tmp_path) == (None, None)
    assert not (tmp_path / missing).exists()
    with pytest.raises(ValueError, match="not a run id"):
        NNCheckpoint.load_training_state("../escape", root=tmp_path)
    run, _ = trained(tmp_path)
    state = NNCheckpoint.load_training_state(run.id, root=tmp_path)
    assert state["epoch"] == 1 and state["generation"] == 2
    assert "state" in NNCheckpoint.load_optimizer_state(run.id, root=tmp_path)


def test_a_ctrl_c_inside_the_window_is_held_until_the_block_completes():
    done = []
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)
        done.append("finished")  # still runs: the interrupt waits for the block
    assert done == ["finished"]
    with pytest.raises(KeyboardInterrupt), interrupts_held():
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)  # a second Ctrl-C stops at once
        done.append("not reached")
    assert done == ["finished"]


def test_safetensors_checkpoints_beside_pickle_ones(tmp_path):
    from safetensors import safe_open

    from nnx import ModelCheckpoint

    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(4,)))
    batches = [(torch.randn(6, 3), torch.randint(0, 2, (6,)))]
    run = model.train(NNTrainParams(n_epochs=2, train_loader=batches, val_loader=batches),
                      callbacks=[ModelCheckpoint(prefix="snap", format="safetensors")],
                      verbose=False, root=tmp_path)
    path = run.checkpoints_dir / "snap_e1.safetensors"
    with safe_open(str(path), framework="pt") as handle:  # a real safetensors file
        assert set(handle.keys()) == set(model.net.state_dict())
    for location in ("cpu", torch.device("cpu"), None):
        loaded = NNCheckpoint.from_file(path, map_location=location)
        assert loaded.epoch == 1 and not loaded.training_state_present
        assert all(torch.equal(loaded.state_dict[k], v) for k, v in model.net.state_dict().items())
    for bad in (lambda storage, loc: storage, {"cuda:0": "cpu"}):
        with pytest.raises(TypeError, match=r"device string or torch\.device"):
            NNCheckpoint.from_file(path, map_location=bad)
    from nnx._persistence.point_verify import verify_point

    assert verify_point(path).generation == 1  # a resume point like any other
    rebuilt = NNModel.from_checkpoint(path)
    x = batches[0][0]
    assert torch.equal(rebuilt.predict(x).logits, model.predict(x).logits)
    # The pickle path still forwards torch.load's mapping form.
    pickle = NNCheckpoint.from_file(run.checkpoints_dir / "last.pt", map_location={"cpu": "cpu"})
    assert pickle.epoch == 1
