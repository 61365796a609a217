"""The nnx command line."""

from __future__ import annotations

import re

import torch

from nnx.cli import installed_distributions, main


def test_info_lists_distributions_torch_and_devices(capsys):
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^  nnx-core 0\.1\.0$", out, re.M)
    assert f"torch {torch.__version__}" in out
    assert re.search(r"^devices: cpu", out, re.M)
    assert installed_distributions()[0] == ("nnx-core", "0.1.0")


def test_demo_trains_and_reports(capsys):
    assert main(["demo", "--epochs", "12"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^run id [0-9a-f]{32} ", out, re.M)
    acc = float(re.search(r"final validation accuracy ([0-9.]+)%", out).group(1))
    assert acc >= 85.0, out
    # Same configuration, same id.
    main(["demo", "--epochs", "12"])
    again = capsys.readouterr().out
    assert out.splitlines()[0] == again.splitlines()[0]
