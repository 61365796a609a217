"""attribute: the six Captum methods behind one call — integrated gradients exact on a
Linear, completeness within Captum's convergence delta on an MLP, the input's shape from
every method, validated Plotly heatmaps, and §13.2 for every method."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
import torch
from _viz_tiny import assert_same, mixed, snapshot
from torch import nn

captum_attr = pytest.importorskip("captum.attr")

from nnx.viz import METHODS, UnknownMethodError, attribute  # noqa: E402


def mlp() -> nn.Module:
    torch.manual_seed(0)
    # Separate ReLU modules: DeepLift needs one module per non-linearity call.
    return nn.Sequential(nn.Linear(5, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(),
                         nn.Linear(8, 3))


def test_the_six_methods_are_the_specs():
    assert list(METHODS) == ["integrated_gradients", "gradient_shap", "deep_lift",
                             "saliency", "input_x_gradient", "occlusion"]


def test_integrated_gradients_on_a_linear_is_the_input_times_the_weight():
    torch.manual_seed(0)
    net = nn.Linear(5, 3)
    x = torch.randn(4, 5)
    attribution, _ = attribute(net, x, method="integrated_gradients", target=2)
    torch.testing.assert_close(attribution, (x - 0) * net.weight[2].detach(),
                               rtol=0, atol=1e-5)


def test_integrated_gradients_completeness_gap_is_within_captums_delta():
    net = mlp()
    torch.manual_seed(1)
    x = torch.randn(3, 5)
    attribution, _ = attribute(net, x, method="integrated_gradients", target=1, n_steps=64)
    _, delta = captum_attr.IntegratedGradients(net).attribute(
        x, target=1, n_steps=64, return_convergence_delta=True)
    with torch.no_grad():
        expected = net(x)[:, 1] - net(torch.zeros_like(x))[:, 1]
    gap = (attribution.sum(dim=1) - expected).abs()
    assert torch.all(gap <= delta.abs() + 1e-6)
    assert float(gap.max()) < 1e-2


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_returns_the_inputs_shape_and_a_valid_heatmap(method):
    net = mlp()
    x = torch.randn(4, 5)
    attribution, fig = attribute(net, x, method=method, target=0)
    assert attribution.shape == x.shape and not attribution.requires_grad
    json.loads(pio.to_json(fig, validate=True))
    (trace,) = fig.data
    assert trace.type == "heatmap"
    np.testing.assert_allclose(np.array(trace.z), attribution.numpy(), rtol=1e-6, atol=1e-7)


class Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.relu = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(3, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(self.relu(self.conv(x))).flatten(1))


@pytest.mark.parametrize("method", ["occlusion", "saliency"])
def test_an_image_batch_shows_the_first_sample_averaged_over_channels(method):
    torch.manual_seed(0)
    net, x = Conv(), torch.randn(2, 2, 5, 5)
    attribution, fig = attribute(net, x, method=method, target=1)
    assert attribution.shape == x.shape
    json.loads(pio.to_json(fig, validate=True))
    np.testing.assert_allclose(np.array(fig.data[0].z), attribution[0].mean(0).numpy(),
                               rtol=1e-6, atol=1e-7)


def test_the_callers_input_is_left_alone():
    x = torch.randn(2, 5)
    attribute(mlp(), x, method="saliency", target=0)
    assert not x.requires_grad and x.grad is None


def test_an_unknown_method_is_refused_with_the_six_names():
    with pytest.raises(UnknownMethodError, match="integrated_gradients, gradient_shap"):
        attribute(mlp(), torch.randn(2, 5), method="lime", target=0)
    with pytest.raises(ValueError, match="convergence delta"):
        attribute(mlp(), torch.randn(2, 5), method="integrated_gradients", target=0,
                  return_convergence_delta=True)


@pytest.mark.parametrize("method", list(METHODS))
def test_attribute_restores_a_mixed_tree_flags_grads_and_hooks(method):
    net = mixed()
    net(torch.randn(3, 4)).sum().backward()  # a caller between backward() and step()
    seen = []
    net.drop.register_forward_pre_hook(lambda m, a: seen.append(m.training))
    before = snapshot(net)
    attribute(net, torch.randn(3, 4), method=method, target=0)
    assert seen and not any(seen)  # every forward ran in eval mode
    assert_same(net, before)


@pytest.mark.parametrize("method", list(METHODS))
def test_attribute_restores_the_tree_when_the_forward_raises(method):
    net = mixed()
    net.boom.armed = True
    before = snapshot(net)
    with pytest.raises(RuntimeError, match="boom"):
        attribute(net, torch.randn(3, 4), method=method, target=0)
    assert_same(net, before)
