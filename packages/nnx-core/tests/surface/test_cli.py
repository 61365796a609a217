"""The nnx command line: info, demo, runs list / show."""

from __future__ import annotations

import re

import pytest
import torch

from nnx._surface.cli import installed_distributions, main


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    return tmp_path


def test_info_lists_distributions_torch_and_devices(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  nnx-core 0\.1\.0$", out, re.M)
    assert f"torch {torch.__version__}" in out
    assert re.search(r"^devices: cpu", out, re.M)
    assert installed_distributions()[0] == ("nnx-core", "0.1.0")


def test_demo_trains_reports_and_finds_its_run_again(capsys, in_tmp):
    assert main(["demo", "--epochs", "12", "--quiet"]) == 0
    out = capsys.readouterr().out
    run_id = re.search(r"^Run saved to runs/([0-9a-f]{32})$", out, re.M).group(1)
    assert (in_tmp / "runs" / run_id / "run.yaml").is_file()
    assert (in_tmp / "runs" / "best").resolve().name == run_id
    assert re.search(r"^BEST is epoch \d+: runs/[0-9a-f]{32}/checkpoints/best\.pt$", out, re.M)
    accuracy = float(re.search(r"test accuracy of BEST: ([0-9.]+)%", out).group(1))
    assert accuracy >= 90.0, out
    # Same configuration, same id: the second demo says so and how to re-run.
    assert main(["demo", "--epochs", "12", "--quiet"]) == 0
    again = capsys.readouterr().out
    assert f"run {run_id} already exists" in again
    assert "--salt" in again and "--overwrite" in again
    assert main(["runs", "list"]) == 0
    listing = capsys.readouterr().out
    assert re.search(rf"^{run_id}\s+FEED_FWD\s+12\s+.*\*$", listing, re.M)
    assert main(["runs", "show", run_id]) == 0
    shown = capsys.readouterr().out
    assert f"run: {run_id}" in shown and "epochs: 12" in shown


def test_runs_show_unknown_run_fails_cleanly(capsys):
    assert main(["runs", "show", "0" * 32]) == 1
    assert "no run" in capsys.readouterr().err
    assert main(["runs", "list"]) == 0
    assert "no runs under runs/" in capsys.readouterr().out


def _demo_run_id(capsys) -> str:
    assert main(["demo", "--epochs", "4", "--quiet"]) == 0
    out = capsys.readouterr().out
    return re.search(r"^Run saved to runs/([0-9a-f]{32})$", out, re.M).group(1)


def test_runs_verify_reports_every_resume_point(capsys, in_tmp):
    run_id = _demo_run_id(capsys)
    assert main(["runs", "verify", run_id]) == 0
    lines = capsys.readouterr().out.splitlines()
    tags = [line.split()[1] for line in lines]
    assert tags == sorted(tags) and {"first", "last", "best"} <= set(tags)
    assert all(re.fullmatch(r"ok  \S+  generation \d+  epoch \d+", line) for line in lines)
    assert "ok  last  generation 4  epoch 3" in lines
    # An explicit root works the same.
    assert main(["runs", "verify", run_id, "--root", "runs"]) == 0
    assert capsys.readouterr().out.splitlines() == lines


def test_runs_verify_fails_on_a_corrupted_checkpoint(capsys, in_tmp):
    run_id = _demo_run_id(capsys)
    best = in_tmp / "runs" / run_id / "checkpoints" / "best.pt"
    data = bytearray(best.read_bytes())
    data[len(data) // 2] ^= 0xFF
    best.write_bytes(bytes(data))
    # first.pt as a checkpoint from before manifests: no manifest, no generation recorded.
    first = best.parent / "first.pt"
    payload = torch.load(first, weights_only=True)
    for key in ("generation", "checkpoint_id", "sidecar"):
        payload.pop(key, None)
    torch.save(payload, first)
    (best.parent / "first.pt.manifest.json").unlink()
    assert main(["runs", "verify", run_id]) == 1
    out = capsys.readouterr().out
    assert re.search(r"^ok  first  legacy$", out, re.M)
    assert "FAIL best  corrupted: checkpoint best.pt does not match its SHA-256" in out
    assert re.search(r"^ok  last  generation \d+  epoch 3$", out, re.M)  # the others still pass


def test_runs_verify_an_unknown_run_fails_cleanly(capsys):
    assert main(["runs", "verify", "0" * 32]) == 1
    captured = capsys.readouterr()
    assert f"no run {'0' * 32!r} under runs" in captured.err and captured.out == ""
    assert main(["runs", "verify", "../etc"]) == 1
    assert "no run" in capsys.readouterr().err


def test_the_same_demo_configuration_trains_the_same_weights(capsys, in_tmp):
    """The run id names the configuration, seed included: initial weights are seeded too."""
    import torch

    from nnx import NNCheckpoint

    weights = []
    for salt in ("first", "second"):
        assert main(["demo", "--epochs", "2", "--quiet", "--salt", salt]) == 0
        out = capsys.readouterr().out
        run_id = re.search(r"^Run saved to runs/([0-9a-f]{32})$", out, re.M).group(1)
        weights.append(NNCheckpoint.load(run_id, "last", root=in_tmp / "runs").state_dict)
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])
