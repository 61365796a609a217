"""netron_export: core's ONNX export of the net (its refusals first), Netron only with
launch=True, and §13.2."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from _viz_tiny import assert_same, feed_forward, mixed, snapshot
from torch import nn

from nnx.viz import netron_export


class NoOnnx(Exception):
    pass


class Refusing(nn.Linear):
    def refuse_onnx_export(self) -> None:
        raise NoOnnx("this net has no ONNX form")


def test_a_net_that_refuses_onnx_export_is_refused_before_any_file(tmp_path):
    net = Refusing(3, 2)
    before = snapshot(net)
    with pytest.raises(NoOnnx):
        netron_export(net, tmp_path / "n.onnx", torch.randn(1, 3))
    assert list(tmp_path.iterdir()) == []
    assert_same(net, before)


@pytest.mark.skipif(importlib.util.find_spec("nnx.graph_tasks") is None,
                    reason="nnx-graph not installed")
def test_a_graph_classifier_is_refused_as_to_onnx_refuses_it(tmp_path):
    from nnx import Devices, Losses, NNModel, NNModelParams
    from nnx.graph_tasks import GraphClassifier, GraphExportRefused, graph_classifier_spec

    spec = graph_classifier_spec(input_dim=3, num_classes=2, hidden_dims=(4,))
    model = NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY,
                                         device=Devices.CPU), task=GraphClassifier(2))
    with pytest.raises(GraphExportRefused, match="ONNX export is refused"):
        netron_export(model, tmp_path / "g.onnx", torch.randn(4, 3))
    assert list(tmp_path.iterdir()) == []


def test_the_export_is_an_onnx_file_of_the_net(tmp_path):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    model = feed_forward()
    path = netron_export(model, tmp_path / "model.onnx", torch.randn(1, 8))
    assert path == (tmp_path / "model.onnx").resolve()
    onnx.checker.check_model(onnx.load(str(path)))
    x = torch.randn(4, 8)
    (out,) = ort.InferenceSession(str(path)).run(None, {"input": x.numpy()})
    model.net.eval()
    torch.testing.assert_close(torch.from_numpy(out), model.net(x).detach(), rtol=1e-4,
                               atol=1e-5)


def test_messages_name_netron_export(tmp_path):
    with pytest.raises(TypeError, match=r"^nnx\.viz\.netron_export: example_input must"):
        netron_export(feed_forward(), tmp_path / "m.onnx", "not a tensor")


def test_netron_export_restores_a_mixed_tree(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    net = mixed()
    before = snapshot(net)
    netron_export(net, tmp_path / "m.onnx", torch.randn(3, 4))
    assert_same(net, before)


def test_netron_export_restores_the_tree_when_the_forward_raises(tmp_path):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxscript")
    net = mixed()
    net.boom.armed = True
    before = snapshot(net)
    with pytest.raises(RuntimeError, match="boom"):
        netron_export(net, tmp_path / "m.onnx", torch.randn(3, 4))
    assert_same(net, before)
    assert list(tmp_path.iterdir()) == []


def test_launch_opens_the_written_file_in_netron(tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    netron = pytest.importorskip("netron")
    opened = []
    monkeypatch.setattr(netron, "start", lambda path: opened.append(path))
    path = netron_export(feed_forward(), tmp_path / "m.onnx", torch.randn(1, 8), launch=True)
    assert opened == [str(path)] and path.is_file()
    with pytest.raises(TypeError, match="launch must be a bool"):
        netron_export(feed_forward(), tmp_path / "n.onnx", torch.randn(1, 8), launch="yes")
