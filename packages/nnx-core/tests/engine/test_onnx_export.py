"""NNModel.to_onnx (spec §3.2, §13.2; docs/onnx.md): graphs onnxruntime runs like torch."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from torch import nn

from nnx import (
    Devices,
    KeywordInputs,
    ModelSpec,
    Nets,
    NNModel,
    NNModelParams,
    NNParams,
    register_model_factory,
)
from nnx.models import unregister_model_factory
from nnx.params.conv import NNConvParams
from nnx.params.vit import NNViTParams

ort = pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")


def feed_fwd() -> NNModel:
    return NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,),
                                       dropout_prob=0.5),
                   params=NNModelParams(device=Devices.CPU))


def conv() -> NNModel:
    net_params = NNConvParams(input_dim=64, output_dim=3, conv_channels=(4,), in_channels=1)
    return NNModel(net_params=net_params,
                   params=NNModelParams(net=Nets.CONV, device=Devices.CPU))


def vit() -> NNModel:
    net_params = NNViTParams(output_dim=3, image_size=8, patch_size=4, in_channels=1,
                             d_model=16, n_layers=1, n_heads=2)
    return NNModel(net_params=net_params, params=NNModelParams(net=Nets.VIT, device=Devices.CPU))


def run(path, inputs: dict[str, torch.Tensor]) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {k: v.numpy() for k, v in inputs.items()})[0]


@pytest.mark.parametrize(("make", "row"), [(feed_fwd, (4,)), (conv, (1, 8, 8)),
                                           (vit, (1, 8, 8))], ids=["feed_fwd", "conv", "vit"])
def test_an_exported_built_in_net_runs_in_onnxruntime_like_torch(tmp_path, make, row):
    torch.manual_seed(0)
    model = make()
    written = model.to_onnx(tmp_path / "net.onnx", torch.randn(2, *row))
    assert written == (tmp_path / "net.onnx").resolve()
    for batch in (1, 7):  # the batch axis is dynamic by default
        x = torch.randn(batch, *row)
        np.testing.assert_allclose(run(written, {"input": x}), model.predict(x).logits.numpy(),
                                   rtol=1e-5, atol=1e-5)
    assert model.net.training  # back in the mode it was in


class TwoInputs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(4, 3), nn.Linear(2, 3)

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return self.a(x) * torch.sigmoid(self.b(z))


def test_a_registered_factory_and_a_runtime_module_with_two_inputs_export(tmp_path):
    register_model_factory("onnxtest.two", 1, lambda config: TwoInputs())
    try:
        torch.manual_seed(0)
        models = {"registered": NNModel(params=NNModelParams(
            net=ModelSpec("onnxtest.two", 1, seed=1), device=Devices.CPU)),
            "runtime": NNModel(module=TwoInputs())}
        for name, model in models.items():
            path = model.to_onnx(tmp_path / f"{name}.onnx", (torch.randn(2, 4), torch.randn(2, 2)),
                                 input_names=["x", "z"], output_names=["score"])
            x, z = torch.randn(5, 4), torch.randn(5, 2)
            with torch.no_grad():
                expected = model.net(x, z).numpy()
            np.testing.assert_allclose(run(path, {"x": x, "z": z}), expected, rtol=1e-5,
                                       atol=1e-5)
            session = ort.InferenceSession(str(path))
            assert [o.name for o in session.get_outputs()] == ["score"]
    finally:
        unregister_model_factory("onnxtest.two", 1)


def test_dynamic_batch_false_fixes_the_batch_axis(tmp_path):
    path = feed_fwd().to_onnx(tmp_path / "net.onnx", torch.randn(2, 4), dynamic_batch=False)
    session = ort.InferenceSession(str(path))
    assert session.get_inputs()[0].shape == [2, 4]


class Keywords(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 3)

    def forward(self, *, features: torch.Tensor) -> torch.Tensor:
        return self.embed(features)


def _modes(net: nn.Module) -> list[bool]:
    return [m.training for m in net.modules()]


def test_a_mapping_example_is_refused_before_anything_is_written(tmp_path):
    model = NNModel(module=Keywords(), batch_adapter=KeywordInputs(("features",), target="y"))
    before = _modes(model.net)
    with pytest.raises(ValueError, match=(r"got a mapping of keyword inputs \(\['features'\]\)"
                                          r".*wrap the module in one whose forward\(\*tensors\)")):
        model.to_onnx(tmp_path / "net.onnx", {"features": torch.randn(2, 4)})
    assert not (tmp_path / "net.onnx").exists() and _modes(model.net) == before


class NoOnnxForm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(x)

    def refuse_onnx_export(self) -> None:
        raise NotImplementedError("NoOnnxForm has no ONNX form")


def test_a_net_that_refuses_export_is_refused_first_whatever_the_example(tmp_path):
    model = NNModel(module=NoOnnxForm())
    for example in (torch.randn(2, 4), {"x": torch.randn(2, 4)}, "not a tensor"):
        with pytest.raises(NotImplementedError, match="NoOnnxForm has no ONNX form"):
            model.to_onnx(tmp_path / "net.onnx", example)
    assert list(tmp_path.iterdir()) == []


class Pair(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.head(x), x


def test_a_forward_that_returns_no_tensor_is_refused(tmp_path):
    with pytest.raises(TypeError, match="returns one tensor; Pair returned tuple"):
        NNModel(module=Pair()).to_onnx(tmp_path / "net.onnx", torch.randn(2, 4))
    assert list(tmp_path.iterdir()) == []


class DataDependent(nn.Module):
    """Runs eagerly; torch.export cannot trace its branch on a tensor's value."""

    def __init__(self) -> None:
        super().__init__()
        self.frozen = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.frozen(x)
        if h.sum() > 0:
            return self.head(h)
        return -self.head(h)


def test_a_failing_export_restores_every_mode_and_leaves_the_previous_file(tmp_path):
    model = NNModel(module=DataDependent())
    model.net.frozen.eval()  # a mixed-mode tree: the frozen block in eval, the rest training
    before = _modes(model.net)
    assert True in before and False in before
    path = tmp_path / "net.onnx"
    path.write_bytes(b"previous")
    with pytest.raises(torch.onnx.OnnxExporterError, match=r"torch\.export"):
        model.to_onnx(path, torch.randn(2, 4))
    assert _modes(model.net) == before
    assert path.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir()] == ["net.onnx"]  # no stranded temp


def test_a_successful_export_restores_a_mixed_mode_tree(tmp_path):
    model = feed_fwd()
    model.net.layers[0].eval()
    before = _modes(model.net)
    model.to_onnx(tmp_path / "net.onnx", torch.randn(2, 4))
    assert _modes(model.net) == before


@pytest.mark.parametrize("module", ["onnx", "onnxscript"])
def test_without_the_onnx_extra_the_error_names_the_install(tmp_path, monkeypatch, module):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=r'pip install "nnx-core\[onnx\]"'):
        feed_fwd().to_onnx(tmp_path / "net.onnx", torch.randn(2, 4))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("kwargs", "error", "message"), [
    ({"input_names": ["a", "b"]}, ValueError, "name each of the 1 tensor"),
    ({"output_names": "out"}, TypeError, "output_names must be a sequence"),
    ({"dynamic_batch": 1}, TypeError, "dynamic_batch must be a bool"),
    ({"opset_version": 0}, ValueError, "opset_version must be a positive integer"),
])
def test_bad_arguments_are_refused_before_anything_is_written(tmp_path, kwargs, error, message):
    with pytest.raises(error, match=message):
        feed_fwd().to_onnx(tmp_path / "net.onnx", torch.randn(2, 4), **kwargs)
    with pytest.raises(TypeError, match=r"example_input\[1\] must be a tensor"):
        feed_fwd().to_onnx(tmp_path / "net.onnx", (torch.randn(2, 4), 3))
    with pytest.raises(FileNotFoundError, match="does not exist"):
        feed_fwd().to_onnx(tmp_path / "no" / "net.onnx", torch.randn(2, 4))
    assert list(tmp_path.iterdir()) == []


class Varargs(nn.Module):
    """A positional wrapper's shape: ``forward(*tensors)``."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = TwoInputs()

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.inner(*tensors)


def test_a_varargs_forward_keeps_every_input_batch_dynamic(tmp_path):
    model = NNModel(module=Varargs())
    path = model.to_onnx(tmp_path / "net.onnx", (torch.randn(2, 4), torch.randn(2, 2)))
    x, z = torch.randn(6, 4), torch.randn(6, 2)
    with torch.no_grad():
        expected = model.net(x, z).numpy()
    np.testing.assert_allclose(run(path, {"input_0": x, "input_1": z}), expected, rtol=1e-5,
                               atol=1e-5)


@pytest.mark.parametrize(("kwargs", "example", "error", "message"), [
    ({}, "not a tensor", TypeError, r"^acme\.draw: example_input must be a tensor"),
    ({}, {"x": torch.randn(2, 4)}, ValueError, r"^acme\.draw takes positional"),
    ({"input_names": ["a", "b"]}, torch.randn(2, 4), ValueError, r"^acme\.draw: input_names"),
    ({"dynamic_batch": 1}, torch.randn(2, 4), TypeError, r"^acme\.draw: dynamic_batch"),
])
def test_the_extension_seam_exports_a_bare_module_naming_its_callers_owner(
        tmp_path, kwargs, example, error, message):
    # Issue 41: nnx.extend.export_onnx is to_onnx's exporter for an add-on (nnx-viz's
    # netron_export); every message names the add-on's call, never NNModel.to_onnx.
    from nnx.extend import export_onnx

    net = feed_fwd().net
    with pytest.raises(error, match=message):
        export_onnx(net, example, tmp_path / "net.onnx", device=torch.device("cpu"),
                    owner="acme.draw", **kwargs)
    assert list(tmp_path.iterdir()) == []
    written = export_onnx(net, torch.randn(2, 4), tmp_path / "net.onnx",
                          device=torch.device("cpu"), owner="acme.draw")
    (out,) = ort.InferenceSession(str(written)).run(None, {"input": np.ones((3, 4), np.float32)})
    assert out.shape[0] == 3
