"""Sharded training (FSDP2 on gloo, CPU): real torchrun launches of _fsdp_worker.py."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from nnx import NNCheckpoint, NNModel, NNTrainParams, supervised_objective
from nnx.distributed import FSDP, FSDPUnsupportedError

WORKER = Path(__file__).with_name("_fsdp_worker.py")
sys.path.insert(0, str(WORKER.parent))
from test_distributed import env, free_port  # noqa: E402  (the DDP tests' launch helpers)

pytestmark = pytest.mark.skipif(not torch.distributed.is_available(),
                                reason="torch.distributed is not available")


def torchrun(out: Path, mode: str) -> list[dict]:
    import subprocess

    out.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # free_port() closes its socket: another process may take the port
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(WORKER),
               str(out), mode]
        done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=240)
        if done.returncode == 0 or "address already in use" not in done.stderr.lower():
            break
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-8000:]
    assert done.stdout.count("Run saved to") == (1 if mode == "fit" else 0)  # rank 0 alone
    return [torch.load(out / f"{mode}{r}.pt", weights_only=True) for r in (0, 1)]


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
    # So one process resumes the FSDP run statefully, as it resumes its own.
    resumed, own = w.fresh_model(), w.fresh_model()
    status = resumed.train(w.fit_params(16, 3, resume_from_run_id=zero["run_id"]),
                           verbose=False, root=tmp_path / "fsdp" / "runs").resume_status
    own.train(w.fit_params(16, 3, resume_from_run_id=run.id), verbose=False,
              root=tmp_path / "single")
    assert status.mode == "stateful"
    for name, value in own.net.state_dict().items():
        torch.testing.assert_close(resumed.net.state_dict()[name], value, atol=1e-6, rtol=1e-5)


@pytest.mark.slow
def test_accumulation_clipping_and_a_nan_on_one_rank_agree_as_under_ddp(tmp_path):
    """Uneven, masked microbatches accumulated two to a window equal one full-batch
    update under FSDP as under DDP; clipping the global norm of the sharded gradients and
    dropping the window a NaN on rank 1 poisoned give DDP's weights on both ranks (that
    fit with named units, activation checkpointing and no resharding after forward); a
    Trainer's own step function and an objective over masked microbatches (the ranks'
    denominators differ) train as under DDP."""
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
        torch.testing.assert_close(fsdp[0]["objective"][name], ddp[0]["objective"][name],
                                   atol=1e-6, rtol=1e-5)
        assert torch.equal(fsdp[0]["objective"][name], fsdp[1]["objective"][name])


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


@pytest.mark.parametrize("case", ["param_dtype", "cpu_offload", "resume", "objective"])
def test_refusals_come_before_anything_is_written_or_joined(tmp_path, monkeypatch, case):
    """Refused before a process group is joined (no launcher is needed to see it) and
    before the run is reserved."""
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    from _nnx_core_tiny import sgd, tiny_batches, tiny_model

    spec = {"param_dtype": FSDP(param_dtype=torch.bfloat16),
            "cpu_offload": FSDP(cpu_offload=True)}.get(case, FSDP())
    changes = {"resume_from_run_id": "0" * 32} if case == "resume" else {}
    optim = sgd()
    if case == "objective":  # an objective's window of several microbatches
        optim = dataclasses.replace(optim, accumulate_grad_batches=2)
    params = NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=optim, **changes)
    objective = supervised_objective() if case == "objective" else None
    match = {"param_dtype": "CUDA", "cpu_offload": "CUDA", "resume": "not in this release",
             "objective": "not in this release"}[case]
    with pytest.raises(FSDPUnsupportedError, match=match):
        tiny_model().train(params, distributed=spec, objective=objective, verbose=False,
                           root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
    assert not torch.distributed.is_initialized()
