"""Multi-process training (DDP on gloo, CPU): real torchrun launches of _ddp_worker.py."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader

from nnx import NNCheckpoint, NNModel, NNRun
from nnx.distributed import DDP

WORKER = Path(__file__).with_name("_ddp_worker.py")
pytestmark = pytest.mark.skipif(not torch.distributed.is_available(),
                                reason="torch.distributed is not available")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def env() -> dict[str, str]:
    # faulthandler: a rank that aborts prints every thread's Python stack into the report.
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1",
            "PYTHONFAULTHANDLER": "1"}


def torchrun(out: Path, mode: str, batch: int = 8) -> subprocess.CompletedProcess[str]:
    out.mkdir(parents=True, exist_ok=True)
    for _ in range(3):  # free_port() closes its socket: another process may take the port
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(WORKER),
               str(out), mode, str(batch)]
        done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=240)
        if done.returncode == 0 or "address already in use" not in done.stderr.lower():
            break
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-8000:]
    return done


def single(out: Path, mode: str, batch: int) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, str(WORKER), str(out), mode, str(batch)], env=env(),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return torch.load(out / "rank0.pt", weights_only=True)


def ranks(out: Path) -> list[dict]:
    return [torch.load(out / f"rank{r}.pt", weights_only=True) for r in (0, 1)]


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess[str]]:
    """One torchrun launch of the default step, shared by the tests that read it."""
    out = tmp_path_factory.mktemp("ddp-default")
    return out, torchrun(out, "default")


def test_two_ranks_write_one_run_whose_validation_is_the_single_process_value(default_run):
    out, done = default_run
    assert done.stdout.count("Run saved to") == 1  # rank 0 alone reports
    zero, one = ranks(out)
    assert zero["wrappers"] == one["wrappers"] == 0  # the fit let go of its DDP wrapper
    runs = [p for p in (out / "runs").iterdir()
            if not p.name.startswith(".") and p.is_dir() and not p.is_symlink()]
    assert [p.name for p in runs] == [zero["run_id"]] == [one["run_id"]]
    assert zero["epochs"] == [0, 1, 2]
    for name, value in zero["weights"].items():  # both ranks end with identical weights
        assert torch.equal(value, one["weights"][name]), name
        assert not name.startswith("module.")
    # The recorded validation loss is a single-process evaluation of the saved weights.
    last = NNCheckpoint.load(zero["run_id"], "last", root=out / "runs")
    assert set(last.state_dict) == set(zero["weights"])
    model = NNModel.from_checkpoint(last)
    sys.path.insert(0, str(WORKER.parent))
    from _ddp_worker import data

    _, val = data()
    expected = model.evaluate(DataLoader(val, batch_size=16))
    recorded = NNRun.load(zero["run_id"], root=out / "runs").epoch_records()[-1].val_edp
    assert recorded.loss == pytest.approx(expected.loss, abs=1e-6)
    assert recorded.accuracy == expected.accuracy
    # The resumed single-process run reads the DDP checkpoint (no "module." keys).
    assert all(not k.startswith("module.") for k in last.state_dict)


@pytest.mark.parametrize("mode", ["default", "objective", "masked"])
def test_two_ranks_equal_one_process_with_the_doubled_batch(tmp_path, mode, default_run):
    """Masked: ignored targets spread unevenly over the ranks, so each rank's loss weight
    differs; the update is still the one of the union (the global weight)."""
    out = default_run[0] if mode == "default" else tmp_path / "ddp"
    if mode != "default":
        torchrun(out, mode, batch=8)
    reference = single(tmp_path / "one", {"default": "single"}.get(mode, f"single-{mode}"),
                       batch=16)
    zero, _ = ranks(out)
    for name, value in zero["weights"].items():
        torch.testing.assert_close(value, reference["weights"][name], atol=1e-6, rtol=1e-5,
                                   msg=name)
    # The whole-epoch training summary is reduced as sums and counts: rank 0 records
    # what one process over the union of both ranks' batches records.
    ddp = NNRun.load(zero["run_id"], root=out / "runs").epoch_records()
    one = NNRun.load(reference["run_id"], root=tmp_path / "one" / "runs").epoch_records()
    assert len(ddp) == len(one) == 3
    for mine, theirs in zip(ddp, one, strict=True):
        a, b = mine.train_summary, theirs.train_summary
        assert a is not None and b is not None
        assert a.loss == pytest.approx(b.loss, abs=1e-6)
        if mode != "objective":  # an objective records its loss only on training batches
            assert a.accuracy == b.accuracy and a.f1 == pytest.approx(b.f1, abs=1e-9)
            assert a.metrics.keys() == b.metrics.keys() == {"f1", "nll"}
            for key in a.metrics:
                assert a.metrics[key] == pytest.approx(b.metrics[key], abs=1e-6)


def test_a_stop_requested_on_one_rank_stops_both_at_the_same_epoch(tmp_path):
    out = tmp_path / "ddp"
    torchrun(out, "stop")
    zero, one = ranks(out)
    assert zero["last_epoch"] == one["last_epoch"] == 1
    assert zero["epochs"] == [0, 1]


def test_a_killed_rank_makes_the_other_fail_instead_of_hanging(tmp_path):
    port = free_port()
    procs = []
    for rank in (0, 1):
        rank_env = {**env(), "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2",
                    "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
        procs.append(subprocess.Popen([sys.executable, str(WORKER), str(tmp_path), "kill"],
                                      env=rank_env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    start = time.monotonic()
    try:
        _, err0 = procs[0].communicate(timeout=120)  # the worker's DDP(timeout_s=8)
        procs[1].communicate(timeout=30)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert procs[1].returncode == 3
    assert procs[0].returncode != 0 and time.monotonic() - start < 120
    assert "Error" in err0 or "error" in err0
    assert not (tmp_path / "rank0.pt").exists()


def test_resumes_cross_world_sizes_and_draw_what_the_uninterrupted_run_would(tmp_path):
    sys.path.insert(0, str(WORKER.parent))
    from _ddp_worker import fresh_model, shuffled_params

    single_run = fresh_model().train(shuffled_params(2), verbose=False,
                                     root=tmp_path / "single")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2",
           "--master_addr=127.0.0.1", f"--master_port={free_port()}", str(WORKER),
           str(tmp_path), "split", single_run.id]
    done = subprocess.run(cmd, env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-8000:]
    zero, one = (torch.load(tmp_path / f"split{r}.pt", weights_only=True) for r in (0, 1))
    assert zero["mode"] == "stateful"
    for name, value in zero["whole"].items():  # 2 + 1 epochs under DDP equal 3 straight
        assert torch.equal(value, zero["resumed"][name]), name
        assert torch.equal(value, one["resumed"][name]), name
        assert torch.equal(zero["from_single"][name], one["from_single"][name]), name
    # And back: one process resumes the DDP run statefully.
    back = fresh_model()
    run = back.train(shuffled_params(1, resume_from_run_id=zero["second"]), verbose=False,
                     root=tmp_path / "split")
    assert run.resume_status.mode == "stateful"
    assert all(not k.startswith("module.") for k in back.net.state_dict())


def test_ddp_spec_validation_and_a_missing_launcher(monkeypatch):
    with pytest.raises(ValueError, match=r"DDP\.backend"):
        DDP(backend="mpi")
    with pytest.raises(ValueError, match=r"DDP\.timeout_s"):
        DDP(timeout_s=0)
    with pytest.raises(ValueError, match=r"DDP\.static_graph"):
        DDP(static_graph=1)  # type: ignore[arg-type]
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(var, raising=False)
    from _nnx_core_tiny import sgd, tiny_batches, tiny_model

    from nnx import NNTrainParams

    with pytest.raises(RuntimeError, match="torchrun"):
        tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd()),
                           distributed=DDP(), verbose=False)
