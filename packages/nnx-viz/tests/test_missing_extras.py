"""Without Plotly / torchinfo / Captum / Netron, each entry point raises an ImportError
naming the install before any work runs (the model is never looked at: an object that
is no model would otherwise be refused with a TypeError, and a real net stays as it was).
The absence is simulated here; tools/check_alacarte.py --only nnx-viz runs the suite
where the extras are really absent."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
import torch
from _viz_tiny import assert_same, hide, mixed, snapshot

import nnx.viz as viz

CALLS = {
    "summary": lambda m, tmp: viz.summary(m, input_size=(3, 4)),
    "weight_histogram": lambda m, tmp: viz.weight_histogram(m),
    "activation_map": lambda m, tmp: viz.activation_map(m, torch.randn(3, 4), "head"),
    "gradient_flow": lambda m, tmp: viz.gradient_flow(m),
    "attribute": lambda m, tmp: viz.attribute(m, torch.randn(3, 4), method="saliency",
                                              target=0),
    "netron_export": lambda m, tmp: viz.netron_export(m, tmp / "m.onnx", torch.randn(3, 4),
                                                      launch=True),
}

CASES = [
    ("summary", "torchinfo", 'pip install "nnx-viz[torchinfo]"'),
    ("attribute", "captum", 'pip install "nnx-viz[captum]"'),
    ("netron_export", "netron", 'pip install "nnx-viz[netron]"'),
    ("weight_histogram", "plotly", "pip install plotly"),
    ("activation_map", "plotly", "pip install plotly"),
    ("gradient_flow", "plotly", "pip install plotly"),
    ("attribute", "plotly", "pip install plotly"),
]


@pytest.mark.parametrize(("entry", "package", "install"), CASES)
def test_each_entry_point_names_its_install_before_any_work(entry, package, install,
                                                            monkeypatch, tmp_path):
    if (entry, package) == ("attribute", "plotly") and importlib.util.find_spec("captum") is None:
        pytest.skip("Captum is absent too: attribute names it first (the captum case)")
    hide(monkeypatch, package)
    message = (f"nnx.viz.{entry} needs the {package!r} package; install it with "
               f"{install}")
    with pytest.raises(ImportError) as raised:
        CALLS[entry](object(), tmp_path)  # no model: work would raise TypeError
    assert str(raised.value) == message
    net = mixed()
    before = snapshot(net)
    with pytest.raises(ImportError, match="install it with"):
        CALLS[entry](net, tmp_path)
    assert_same(net, before)
    assert list(tmp_path.iterdir()) == []


def test_summary_needs_no_plotly(monkeypatch):
    pytest.importorskip("torchinfo")
    hide(monkeypatch, "plotly")
    assert viz.summary(mixed()).total_params > 0


def test_importing_nnx_viz_needs_no_optional_package():
    code = ("import sys, nnx.viz; print(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'plotly', 'torchinfo', 'captum', 'netron', 'onnx'}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
