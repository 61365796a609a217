"""weight_histogram, activation_map and gradient_flow: Plotly figures (validated by
plotly's own JSON validation), their refusals, and §13.2 for activation_map."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
import torch
from _viz_tiny import assert_same, feed_forward, mixed, snapshot
from torch import nn

from nnx.viz import (
    NoGradientError,
    UnknownLayerError,
    activation_map,
    gradient_flow,
    weight_histogram,
)


def valid(fig):
    """``fig`` after plotly validates every property of its JSON (raises otherwise)."""
    assert fig.to_plotly_json()["data"]
    assert json.loads(pio.to_json(fig, validate=True))["data"]
    return fig


class Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 5, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(5, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.pool(torch.relu(self.conv1(x))).flatten(1))


def test_weight_histogram_has_one_trace_per_tensor_and_counts_non_finite_weights():
    model = feed_forward()
    names = [n for n, _ in model.net.named_parameters()]
    with torch.no_grad():
        model.net.get_parameter(names[0]).view(-1)[:3] = float("nan")
    fig = valid(weight_histogram(model))
    assert [t.type for t in fig.data] == ["histogram"] * len(names)
    titles = [a.text for a in fig.layout.annotations]
    assert titles[0] == f"{names[0]} (3 non-finite)" and titles[1:] == names[1:]
    assert len(fig.data[0].x) == model.net.get_parameter(names[0]).numel() - 3
    np.testing.assert_array_equal(fig.data[1].x, model.net.get_parameter(names[1])
                                  .detach().numpy().ravel())


def test_weight_histogram_of_a_net_without_parameters_is_refused():
    with pytest.raises(ValueError, match="no parameters"):
        weight_histogram(nn.ReLU())


def test_activation_map_of_a_dense_layer_is_one_batch_by_feature_heatmap():
    model = feed_forward()
    x = torch.randn(4, 8)
    (trace,) = valid(activation_map(model, x, "layers.0")).data
    expected = model.net.get_submodule("layers.0")(x).detach().numpy()
    assert trace.type == "heatmap"
    np.testing.assert_allclose(np.array(trace.z), expected, rtol=1e-6, atol=1e-6)


def test_activation_map_of_a_conv_layer_is_a_grid_of_channel_heatmaps():
    torch.manual_seed(0)
    net, x = Conv(), torch.randn(2, 1, 6, 6)
    fig = valid(activation_map(net, x, "conv1"))
    assert [t.type for t in fig.data] == ["heatmap"] * 5
    with torch.no_grad():
        first = net.conv1(x)[0]
    for c, trace in enumerate(fig.data):
        np.testing.assert_allclose(np.array(trace.z), first[c].numpy(), atol=1e-6)


def test_an_unknown_layer_name_lists_the_available_names_before_the_model_runs():
    net = mixed()
    before = snapshot(net)
    with pytest.raises(UnknownLayerError, match=r"no submodule 'bakbone'; available: "
                                                r"'backbone', 'backbone\.0'") as raised:
        activation_map(net, torch.randn(3, 4), "bakbone")
    assert isinstance(raised.value, ValueError)
    assert_same(net, before)


def test_activation_map_restores_a_mixed_tree_and_removes_its_hook():
    net = mixed()
    seen = []
    net.drop.register_forward_pre_hook(lambda m, a: seen.append(m.training))
    before = snapshot(net)
    activation_map(net, torch.randn(3, 4), "backbone.1")
    assert seen == [False]  # the run itself is in eval mode
    assert_same(net, before)


def test_activation_map_restores_the_tree_when_the_forward_raises():
    net = mixed()
    net.boom.armed = True
    before = snapshot(net)
    with pytest.raises(RuntimeError, match="boom"):
        activation_map(net, torch.randn(3, 4), "backbone.0")
    assert_same(net, before)


def test_gradient_flow_draws_trainable_parameters_with_a_gradient_only():
    net = mixed()
    net(torch.randn(5, 4)).sum().backward()
    (trace,) = valid(gradient_flow(net)).data
    expected = [(n, float(p.grad.norm())) for n, p in net.named_parameters()
                if p.requires_grad and p.grad is not None]
    assert "backbone.0.weight" not in trace.x  # frozen
    assert list(trace.x) == [n for n, _ in expected]
    np.testing.assert_allclose(trace.y, [v for _, v in expected], rtol=1e-6)


def test_gradient_flow_without_any_gradient_is_a_value_error():
    with pytest.raises(NoGradientError, match=r"loss\.backward\(\)") as raised:
        gradient_flow(mixed())
    assert isinstance(raised.value, ValueError)


def test_a_non_model_is_refused():
    with pytest.raises(TypeError, match=r"^nnx\.viz\.weight_histogram: expected an "
                                        r"nn\.Module or a model with a \.net module"):
        weight_histogram(object())
