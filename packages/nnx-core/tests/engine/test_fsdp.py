"""Sharded training (FSDP2 on gloo, CPU): real torchrun launches of _fsdp_worker.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from nnx import NNCheckpoint, NNModel, NNTrainParams
from nnx.distributed import FSDP, FSDPUnsupportedError

WORKER = Path(__file__).with_name("_fsdp_worker.py")
sys.path.insert(0, str(WORKER.parent))
from test_distributed import env, free_port  # noqa: E402  (the DDP tests' launch helpers)

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(),
                                reason="torch.distributed is not available")


def torchrun(out: Path, mode: str, *args: str, ranks: int = 2) -> list[dict]:
    import subprocess

    out.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # free_port() closes its socket: another process may take the port
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={ranks}",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(WORKER),
               str(out), mode, *args]
        done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=240)
        if done.returncode == 0 or "address already in use" not in done.stderr.lower():
            break
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-8000:]
    assert done.stdout.count("Run saved to") == (1 if mode == "fit" else 0)  # rank 0 alone
    return [torch.load(out / f"{mode}{r}.pt", weights_only=True) for r in range(ranks)]


def worker():
    import _fsdp_worker

    return _fsdp_worker


@pytest.mark.slow
def test_one_run_whose_id_and_last_are_the_single_process_ones(tmp_path):
    zero, one = torchrun(tmp_path / "fsdp", "fit")
    assert zero["sharded"].startswith("FSDP")  # model.net itself was sharded in place
    # Each rank holds half of every parameter; the names are the net's own.
    assert zero["local"]["layers.0.weight"] == (8, 6) and "layers.0.weight" in zero["weights"]
    runs = [p.name for p in (tmp_path / "fsdp" / "runs").iterdir()
            if not p.name.startswith(".") and p.is_dir() and not p.is_symlink()]
    assert runs == [zero["run_id"]] == [one["run_id"]]
    w = worker()
    single = w.fresh_model()
    run = single.train(w.fit_params(16), verbose=False, root=tmp_path / "single")
    assert run.id == zero["run_id"]  # FSDP is runtime-only: world size and units too
    for name, value in single.net.state_dict().items():  # 2 ranks × 8 = one process × 16
        torch.testing.assert_close(zero["weights"][name], value, atol=1e-6, rtol=1e-5)
        assert torch.equal(zero["weights"][name], one["weights"][name])
    # LAST holds the full model: a single process loads it and predicts what the
    # sharded model's gathered forward computed.
    last = NNCheckpoint.load(zero["run_id"], "last", root=tmp_path / "fsdp" / "runs")
    assert {k: tuple(v.shape) for k, v in last.state_dict.items()} == {
        k: tuple(v.shape) for k, v in single.net.state_dict().items()}
    # ModelCheckpoint's snapshots are whole too (what the commit gathered, not rank 0's
    # shards): the last one holds LAST's weights.
    snapshot = NNCheckpoint.load(zero["run_id"], "custom_e1", root=tmp_path / "fsdp" / "runs")
    assert snapshot.state_dict.keys() == last.state_dict.keys()
    assert all(torch.equal(snapshot.state_dict[k], v) for k, v in last.state_dict.items())
    loaded = NNModel.from_checkpoint(last)
    _, val = w.data()
    with torch.no_grad():
        assert torch.equal(loaded.net(val[:][0]), zero["output"])
    assert torch.equal(zero["output"], one["output"])
    # The optimizer state is the full one, in a single process's own format.
    mine = last.training_state()
    theirs = NNCheckpoint.load(run.id, "last", root=tmp_path / "single").training_state()
    assert mine is not None and theirs is not None
    assert mine["optimizer"]["param_groups"] == theirs["optimizer"]["param_groups"]
    assert mine["optimizer"]["state"].keys() == theirs["optimizer"]["state"].keys() == set(
        range(len(theirs["param_names"][0])))
    for key, state in theirs["optimizer"]["state"].items():
        for name, value in state.items():  # AdamW's moments, whole
            torch.testing.assert_close(mine["optimizer"]["state"][key][name], value,
                                       atol=1e-6, rtol=1e-5)
    assert mine["param_names"] == theirs["param_names"]
    _check_sharded_optimizer_files(tmp_path / "fsdp" / "runs", zero["run_id"])
    # A fit stopped inside an epoch does not rewrite LAST at its end: the optimizer shards
    # its ranks staged for that LAST are removed, not left behind.
    stopped = tmp_path / "fsdp" / "stopped" / zero["stopped"] / "checkpoints"
    assert NNCheckpoint.verify(zero["stopped"], "last", root=stopped.parent.parent
                               ).position["completed_epoch"] == 0
    assert not [p.name for p in stopped.iterdir() if p.name.startswith(".optim-staging.")]
    # So one process resumes the FSDP run statefully, as it resumes its own.
    resumed, own = w.fresh_model(), w.fresh_model()
    status = resumed.train(w.fit_params(16, 3, resume_from_run_id=zero["run_id"]),
                           verbose=False, root=tmp_path / "fsdp" / "runs").resume_status
    own.train(w.fit_params(16, 3, resume_from_run_id=run.id), verbose=False,
              root=tmp_path / "single")
    assert status.mode == "stateful"
    for name, value in own.net.state_dict().items():
        torch.testing.assert_close(resumed.net.state_dict()[name], value, atol=1e-6, rtol=1e-5)
    _planted_metadata_is_never_unpickled(tmp_path / "fsdp" / "runs", zero["run_id"])


def _check_sharded_optimizer_files(root: Path, run_id: str) -> None:
    """The optimizer state went to disk sharded, never whole: each rank's DCP file and the
    metadata in the point's own directory, every one listed with its SHA-256 in the
    manifest; the sidecar holds a marker in its place; only the live generations' shard
    directories remain (no staging directory, no older generation); and a shard whose
    bytes changed makes the point corrupted."""
    from nnx._persistence.optimizer_shards import MARKER
    from nnx._persistence.point_manifest import ResumePointError

    checkpoints = root / run_id / "checkpoints"
    point = NNCheckpoint.verify(run_id, "last", root=root)
    assert point is not None
    shards = point.files["optimizer_shards"]
    assert shards["name"] == f"last.pt.opt.{point.generation}.dcp"
    assert sorted(shards["files"]) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert sorted(p.name for p in (checkpoints / shards["name"]).iterdir()) == sorted(
        shards["files"])
    raw = torch.load(checkpoints / point.sidecar, weights_only=True)
    assert raw["optimizer"] == {MARKER: "optimizer.0"}
    dirs = sorted(p.name for p in checkpoints.iterdir() if p.is_dir())
    live = [NNCheckpoint.verify(run_id, tag, root=root) for tag in ("first", "best", "last")]
    assert dirs == sorted(p.files["optimizer_shards"]["name"] for p in live if p is not None)
    victim = checkpoints / shards["name"] / "__1_0.distcp"
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(ResumePointError, match=r"corrupted.*__1_0\.distcp"):
        NNCheckpoint.verify(run_id, "last", root=root)
    with pytest.raises(ResumePointError, match=r"__1_0\.distcp"):
        NNCheckpoint.load(run_id, "last", root=root).training_state()
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))


class _Payload:
    """Unpickling this runs ``touch`` on the file it names (a planted pickle)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _planted_metadata_is_never_unpickled(root: Path, run_id: str) -> None:
    """DCP's metadata file is a pickle. One planted with a payload, whose digest a
    rewritten manifest vouches for, is refused unexecuted: the payload never runs."""
    import hashlib
    import json
    import pickle

    from nnx._persistence.point_manifest import ResumePointError

    point = NNCheckpoint.verify(run_id, "last", root=root)
    assert point is not None
    shards = root / run_id / "checkpoints" / point.files["optimizer_shards"]["name"]
    marker = shards.parent / "payload-ran"
    planted = pickle.dumps(_Payload(marker))
    (shards / ".metadata").write_bytes(planted)
    manifest = root / run_id / "checkpoints" / "last.pt.manifest.json"
    doc = json.loads(manifest.read_text())
    doc["files"]["optimizer_shards"]["files"][".metadata"] = {
        "sha256": hashlib.sha256(planted).hexdigest(), "size": len(planted)}
    manifest.write_text(json.dumps(doc))
    with pytest.raises(ResumePointError, match=r"posix\.system|os\.system"):
        NNCheckpoint.load(run_id, "last", root=root).training_state()
    assert not marker.exists()


def _optimizer_state(root: Path, run_id: str) -> dict:
    state = NNCheckpoint.load(run_id, "last", root=root).training_state()
    assert state is not None
    return state["optimizer"]


@pytest.mark.slow
def test_a_sharded_resume_is_bit_exact_and_crosses_world_sizes_and_ddp(tmp_path):
    """2 + 1 sharded epochs equal 3 straight ones bit for bit (weights and AdamW state);
    a single-process run and a DDP run resume sharded, and an FSDP run resumes under DDP,
    at 3 ranks (resharded) and in one process."""
    w = worker()
    root = tmp_path / "fsdp" / "runs"
    single_run = w.fresh_model().train(w.resumable_params(2), verbose=False,
                                       root=tmp_path / "fsdp" / "single")
    zero, one = torchrun(tmp_path / "fsdp", "resume", single_run.id)
    assert zero["mode"] == "stateful"
    for name, value in zero["straight"].items():
        assert torch.equal(zero["resumed"][name], value), name
        for result in (zero, one):  # every rank holds the same model
            for key in ("resumed", "from_single", "from_ddp", "to_ddp"):
                assert torch.equal(result[key][name], zero[key][name]), (key, name)
        # A DDP run resumed sharded, and this run resumed replicated, go on as this one.
        torch.testing.assert_close(zero["from_ddp"][name], value, atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(zero["to_ddp"][name], value, atol=1e-6, rtol=1e-5)
    straight = _optimizer_state(root, zero["straight_run"])
    resumed = _optimizer_state(root, zero["resumed_run"])
    def listed(groups):  # a loaded state's tuples (AdamW's betas) come back as lists
        return [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()}
                for g in groups]

    assert listed(straight["param_groups"]) == listed(resumed["param_groups"])
    for key, state in straight["state"].items():
        for field, value in state.items():  # AdamW's step and moments, whole, bit for bit
            assert torch.equal(resumed["state"][key][field], value), (key, field)
    # The single-process run resumed sharded goes on as it does resumed under DDP.
    for name, value in zero["single_ddp"].items():
        torch.testing.assert_close(zero["from_single"][name], value, atol=1e-6, rtol=1e-5)
        assert not torch.equal(value, zero["straight"][name])  # (another trajectory)
    # At another world size the point reshards: 3 ranks continue statefully (not bit
    # for bit: the batches are split otherwise), and their LAST is whole.
    three = torchrun(tmp_path / "fsdp", "reshard", zero["first_run"], ranks=3)
    assert [r["mode"] for r in three] == ["stateful"] * 3
    last = NNCheckpoint.load(three[0]["run"], "last", root=root)
    two = NNCheckpoint.load(zero["first_run"], "last", root=root)
    assert {k: v.shape for k, v in last.state_dict.items()} == {
        k: v.shape for k, v in two.state_dict.items()}
    for name, value in three[0]["weights"].items():
        assert torch.equal(value, three[2]["weights"][name])
        assert torch.equal(last.state_dict[name], value)
        assert not torch.equal(value, two.state_dict[name])  # it trained on
    steps = {int(s["step"]) for s in _optimizer_state(root, three[0]["run"])["state"].values()}
    before = {int(s["step"]) for s in _optimizer_state(root, zero["first_run"])["state"].values()}
    assert len(before) == 1
    assert steps == {before.pop() + 3}  # 64 samples: 22 a rank (8, 8, 6), 3 updates


@pytest.mark.slow
@pytest.mark.parametrize("where", ["state", "files"])
def test_a_rank_killed_in_the_sharded_save_leaves_the_previous_last_resumable(tmp_path, where):
    """Rank 1 is SIGKILLed inside epoch 2's sharded save (before DCP wrote its file, or
    after every file was written): rank 0 never writes epoch 2, LAST of epoch 1
    verifies, the staging directory is a leftover that nothing names, and resuming LAST
    for the 2 lost epochs equals 3 straight bit for bit."""
    import subprocess

    from nnx._persistence.checkpoint import checkpoint_path
    from nnx._persistence.leftovers import find_leftovers, remove_leftovers
    from nnx._persistence.point_verify import verify_point

    out = tmp_path / "fsdp"
    out.mkdir()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(WORKER),
           str(out), "kill", where]
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=240)
    assert done.returncode != 0
    assert "Signal 9" in done.stderr or "SIGKILL" in done.stderr, done.stderr[-4000:]
    assert not list(out.glob("kill*.pt"))  # neither rank finished
    runs = [p for p in (out / "runs").iterdir()
            if p.is_dir() and not p.is_symlink() and not p.name.startswith(".")]
    assert len(runs) == 1
    point = verify_point(checkpoint_path(runs[0].name, "last", root=out / "runs"))
    assert point is not None and point.position["completed_epoch"] == 0  # epoch 1 (0-based)
    assert point.position["committed_updates"] == 4  # 32 samples a rank, 4 updates
    staging = sorted(p.name for p in (runs[0] / "checkpoints").iterdir()
                     if p.name.startswith(".optim-staging."))
    if where == "files":  # every rank's file and the metadata, which no point took
        assert len(staging) == 1
        assert sorted(os.listdir(runs[0] / "checkpoints" / staging[0])) == [
            ".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert find_leftovers(out / "runs", runs[0].name) == [f"checkpoints/{n}" for n in staging]
    assert remove_leftovers(out / "runs", runs[0].name) == [f"checkpoints/{n}" for n in staging]
    assert not any(p.name.startswith(".optim-staging.")
                   for p in (runs[0] / "checkpoints").iterdir())
    assert verify_point(checkpoint_path(runs[0].name, "last", root=out / "runs")) == point
    zero, one = torchrun(out, "after-kill", runs[0].name)
    assert zero["mode"] == "stateful"
    for name, value in zero["straight"].items():
        assert torch.equal(zero["resumed"][name], value), name
        assert torch.equal(one["resumed"][name], value), name


@pytest.mark.slow
def test_accumulation_clipping_and_a_nan_on_one_rank_agree_as_under_ddp(tmp_path):
    """Uneven, masked microbatches accumulated two to a window equal one full-batch
    update under FSDP as under DDP; clipping the global norm of the sharded gradients and
    dropping the window a NaN on rank 1 poisoned give DDP's weights on both ranks (that
    fit with named units, activation checkpointing and no resharding after forward); a
    Trainer's own step function and an objective over masked microbatches (the ranks'
    denominators differ), in windows of one and of two microbatches, train as under
    DDP."""
    fsdp = torchrun(tmp_path, "agree-fsdp")
    ddp = torchrun(tmp_path, "agree-ddp")
    w = worker()
    reference = w.fresh_model(masked=True)
    reference.train(w.accumulation_params(32, 1), verbose=False, root=tmp_path / "single")
    for name, value in reference.net.state_dict().items():
        for result in (fsdp[0], ddp[0]):
            torch.testing.assert_close(result["accumulated"][name], value, atol=1e-6,
                                       rtol=1e-5)
        assert torch.equal(fsdp[0]["accumulated"][name], fsdp[1]["accumulated"][name])
        clipped = fsdp[0]["clipped"][name]
        assert torch.isfinite(clipped).all()  # the poisoned window stepped nowhere
        assert torch.equal(clipped, fsdp[1]["clipped"][name])
        torch.testing.assert_close(clipped, ddp[0]["clipped"][name], atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(fsdp[0]["trainer"][name], ddp[0]["trainer"][name],
                                   atol=1e-6, rtol=1e-5)
        assert torch.equal(fsdp[0]["trainer"][name], fsdp[1]["trainer"][name])
        for key in ("objective", "accumulating"):
            torch.testing.assert_close(fsdp[0][key][name], ddp[0][key][name], atol=1e-6,
                                       rtol=1e-5)
            assert torch.equal(fsdp[0][key][name], fsdp[1][key][name])
        # An objective's window of two uneven, masked microbatches on each rank is one
        # full-batch update, as the default step's is.
        torch.testing.assert_close(fsdp[0]["accumulating"][name], value, atol=1e-6, rtol=1e-5)


def test_fsdp_spec_validation():
    with pytest.raises(ValueError, match=r"FSDP\.backend"):
        FSDP(backend="mpi")
    with pytest.raises(ValueError, match=r"FSDP\.timeout_s"):
        FSDP(timeout_s=0)
    with pytest.raises(ValueError, match=r"FSDP\.reshard_after_forward"):
        FSDP(reshard_after_forward=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"FSDP\.param_dtype"):
        FSDP(param_dtype=torch.int8)
    with pytest.raises(ValueError, match=r"FSDP\.units"):
        FSDP(units=())
    with pytest.raises(ValueError, match=r"FSDP\.units"):
        FSDP(units=(int,))  # type: ignore[arg-type]
    assert FSDP(units=["layers.0", nn.Linear]).units == ("layers.0", nn.Linear)


def test_default_units_are_the_layers_and_named_units_are_checked():
    from nnx._engine.fsdp import shard_units

    model = worker().fresh_model()
    layers = list(model.net.layers)
    assert shard_units(model.net, None) == layers[::-1]  # innermost first
    assert shard_units(model.net, ("layers.1",)) == [layers[1]]
    assert shard_units(model.net, (nn.Linear,)) == layers[::-1]
    with pytest.raises(ValueError, match=r"blocks\.0"):
        shard_units(model.net, ("blocks.0",))
    from nnx import NNViTParams
    from nnx.nets import ViTNN

    vit = ViTNN(NNViTParams(output_dim=3, image_size=8, patch_size=4, d_model=16, n_heads=2))
    assert shard_units(vit, None) == list(vit.blocks)[::-1]  # each transformer block


@pytest.mark.parametrize("spec", [FSDP(param_dtype=torch.bfloat16),
                                  FSDP(reduce_dtype=torch.float32), FSDP(cpu_offload=True)])
def test_gpu_policies_on_a_cpu_model_are_refused_before_anything_is_written_or_joined(
        tmp_path, monkeypatch, spec):
    """Refused before a process group is joined (no launcher is needed to see it) and
    before the run is reserved."""
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    from _nnx_core_tiny import sgd, tiny_batches, tiny_model

    model = tiny_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    params = NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd())
    with pytest.raises(FSDPUnsupportedError, match="needs a CUDA model"):
        model.train(params, distributed=spec, verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert not torch.distributed.is_initialized()
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())


def test_the_full_state_view_refuses_what_it_has_not_gathered():
    """ctx.model_state_dict() under FSDP: rank 0 only, and only once a commit gathered the
    full weights; never an empty dict that would pass for a model."""
    from nnx._engine.fsdp import FullStateNet

    net = nn.Linear(3, 2)
    with pytest.raises(RuntimeError, match="rank 0 only"):
        FullStateNet(net, main=False).state_dict()
    view = FullStateNet(net, main=True)
    with pytest.raises(RuntimeError, match=r"ctx\.defer"):
        view.state_dict()
    view.weights = {k: v.clone() for k, v in net.state_dict().items()}
    assert view.state_dict().keys() == net.state_dict().keys()
