"""AdapterLayer (spec §11.2): the bottleneck residual, identity at init."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nnx.peft import AdapterLayer


def test_adapter_is_the_identity_at_init() -> None:
    torch.manual_seed(0)
    layer = AdapterLayer(dim=6, bottleneck=2)
    x = torch.randn(3, 6)
    assert torch.equal(layer(x), x)
    assert torch.count_nonzero(layer.up.weight) == 0 and torch.count_nonzero(layer.up.bias) == 0
    assert layer.down.weight.shape == (2, 6) and layer.up.weight.shape == (6, 2)


def test_adapter_computes_x_plus_up_act_down() -> None:
    torch.manual_seed(0)
    layer = AdapterLayer(dim=5, bottleneck=3, activation=nn.ReLU)
    with torch.no_grad():
        layer.up.weight.normal_()
        layer.up.bias.normal_()
    x = torch.randn(4, 5)
    want = x + layer.up(torch.relu(layer.down(x)))
    torch.testing.assert_close(layer(x), want, rtol=0, atol=0)
    assert isinstance(layer.act, nn.ReLU)


def test_default_activation_is_gelu_and_every_parameter_trains() -> None:
    layer = AdapterLayer(dim=4, bottleneck=2)
    assert isinstance(layer.act, nn.GELU)
    assert all(p.requires_grad for p in layer.parameters())
    x = torch.randn(2, 4)
    layer(x).sum().backward()
    # up is zero at init but its gradient is not: the adapter learns from step 0.
    assert layer.up.weight.grad is not None and torch.count_nonzero(layer.up.weight.grad) > 0


@pytest.mark.parametrize(("dim", "bottleneck", "field"), [
    (0, 2, "AdapterLayer.dim"), (4, 0, "AdapterLayer.bottleneck"),
    (4.0, 2, "AdapterLayer.dim"), (4, True, "AdapterLayer.bottleneck"),
    (-1, 2, "AdapterLayer.dim"),
])
def test_bad_counts_are_refused_by_name(dim: object, bottleneck: object, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        AdapterLayer(dim, bottleneck)  # type: ignore[arg-type]


def test_an_activation_that_is_not_a_module_factory_is_refused() -> None:
    with pytest.raises(TypeError, match=r"must return an nn\.Module"):
        AdapterLayer(4, 2, activation=lambda: torch.tanh)  # type: ignore[arg-type,return-value]
    with pytest.raises(TypeError, match="module factory"):
        AdapterLayer(4, 2, activation="gelu")  # type: ignore[arg-type]


def test_an_activation_instance_is_used_as_given() -> None:
    act = nn.GELU(approximate="tanh")
    assert AdapterLayer(4, 2, activation=act).act is act
