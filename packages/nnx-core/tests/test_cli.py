"""The nnx command line: info, demo, runs list / show."""

from __future__ import annotations

import re

import pytest
import torch

from nnx.cli import installed_distributions, main


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
