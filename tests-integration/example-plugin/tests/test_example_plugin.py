"""The example plugin's net, optimizer factory and export, and the conformance call.

These tests run with the plugin installed: ``tools/check_alacarte.py`` runs them in a
fresh venv holding only the nnx-core and nnx-example-plugin wheels (and, in its
``--extras peft`` cell, nnx-peft's), from outside the source tree. The task, the
objective, the transform recipe and the optional crossing have a file each.
"""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import pytest

# The workspace run collects this file too, where the plugin is not installed.
pytest.importorskip("nnx.example_plugin", reason="nnx-example-plugin is not installed")

import torch

import nnx
from nnx import Nets, NNParams, OptimizerFactorySpec
from nnx.example_plugin import (
    EXAMPLE_MLP,
    ExampleMLP,
    ExampleMLPParams,
    ExampleScaler,
    example_sgd,
)
from nnx.extend import registered_optimizer_factories
from nnx.optimizers import resolve_optimizer_factory
from nnx.testing import (
    check_distribution,
    tiny_batches,
    tiny_loader,
    tiny_model,
    tiny_train_params,
    weights,
)


def test_the_plugin_keeps_the_add_on_rules() -> None:
    # Imports core only through nnx / nnx.extend, no private core name, no import circle,
    # nnx-peft reached only through require_distribution; every entry point loads and is
    # what nnx resolves its name to, every registered kind __all__ lists has an entry
    # point; and the wheel ships no nnx/__init__.py.
    check_distribution("nnx-example-plugin")


def test_top_level_export_resolves_through_entry_point() -> None:
    from nnx import ExampleScaler as exported

    assert exported is ExampleScaler
    assert nnx.ExampleScaler is ExampleScaler
    assert "ExampleScaler" in dir(nnx)  # announced, so listed before anyone asks for it


def test_example_scaler_multiplies_by_a_learnable_scalar() -> None:
    scaler = ExampleScaler(init=3.0)
    x = torch.tensor([1.0, -2.0])
    assert torch.equal(scaler(x), torch.tensor([3.0, -6.0]))
    params = list(scaler.parameters())
    assert len(params) == 1 and params[0].requires_grad
    scaler(x).sum().backward()
    assert params[0].grad is not None
    assert params[0].grad.item() == pytest.approx(-1.0)


def test_nets_member_builds_and_forwards() -> None:
    member = Nets.EXAMPLE_MLP
    assert member is Nets["EXAMPLE_MLP"]
    assert member.registration is EXAMPLE_MLP
    assert member.params_class is ExampleMLPParams
    assert member in list(Nets)

    params = ExampleMLPParams(input_dim=3, output_dim=2, scale=2.0)
    net = Nets.EXAMPLE_MLP(params)
    assert isinstance(net, ExampleMLP)
    x = torch.randn(4, 3)
    out = net(x)
    assert out.shape == (4, 2)
    linear = net.linear
    assert isinstance(linear, torch.nn.Linear)
    assert torch.allclose(out, 2.0 * linear(x))


def test_nets_member_refuses_the_wrong_params_class() -> None:
    with pytest.raises(TypeError, match="ExampleMLPParams"):
        Nets.EXAMPLE_MLP(NNParams(input_dim=3, output_dim=2))


def test_nets_member_pickles_by_name() -> None:
    assert pickle.loads(pickle.dumps(Nets.EXAMPLE_MLP)) is Nets.EXAMPLE_MLP


def test_optimizer_factory_resolves_by_id_and_version() -> None:
    assert resolve_optimizer_factory(OptimizerFactorySpec("example.sgd", 1)) is example_sgd
    assert ("example.sgd", 1) in registered_optimizer_factories()
    with pytest.raises(LookupError, match=r"example\.sgd@v2"):
        resolve_optimizer_factory(OptimizerFactorySpec("example.sgd", 2))


def test_optimizer_factory_builds_sgd_over_the_groups() -> None:
    net = torch.nn.Linear(2, 1)
    groups = [{"params": list(net.parameters()), "lr": 0.5, "weight_decay": 0.0, "name": "default"}]
    opt = example_sgd(groups, {"momentum": 0.9})
    assert isinstance(opt, torch.optim.SGD)
    assert opt.param_groups[0]["lr"] == 0.5
    assert opt.param_groups[0]["momentum"] == 0.9
    assert {id(p) for p in opt.param_groups[0]["params"]} == {id(p) for p in net.parameters()}


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "2.0", True, None])
def test_scale_is_validated_by_the_core_validator(bad: object) -> None:
    with pytest.raises(ValueError, match=r"ExampleMLPParams\.scale"):
        ExampleMLPParams(input_dim=3, output_dim=2, scale=bad)  # type: ignore[arg-type]


def test_inherited_fields_are_still_validated() -> None:
    with pytest.raises(ValueError, match=r"ExampleMLPParams\.output_dim"):
        ExampleMLPParams(input_dim=3, output_dim=0)
    with pytest.raises(ValueError, match=r"ExampleMLPParams\.dropout_prob"):
        ExampleMLPParams(input_dim=3, output_dim=2, dropout_prob=math.nan)


def test_params_are_frozen_slotted_and_keyword_only() -> None:
    params = ExampleMLPParams(input_dim=3, output_dim=2)
    assert not hasattr(params, "__dict__")
    with pytest.raises(AttributeError):
        params.scale = 3.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        ExampleMLPParams(3, 2)  # type: ignore[call-arg]


def test_state_round_trip() -> None:
    params = ExampleMLPParams(input_dim=3, output_dim=2, scale=2.5)
    state = params.state()
    assert state["scale"] == 2.5
    back = ExampleMLPParams.from_state(state)
    assert back == params
    assert back.state() == state


def test_default_scale_stays_out_of_state() -> None:
    params = ExampleMLPParams(input_dim=3, output_dim=2)
    assert "scale" not in params.state()
    assert ExampleMLPParams.from_state(params.state()) == params


def test_resolve_from_state_uses_the_plugin_params_class() -> None:
    params = ExampleMLPParams(input_dim=3, output_dim=2, scale=2.0)
    resolved = NNParams.resolve_from_state(params.state(), "EXAMPLE_MLP")
    assert type(resolved) is ExampleMLPParams
    assert resolved == params
    by_member = NNParams.resolve_from_state(params.state(), Nets.EXAMPLE_MLP)
    assert by_member == params


# -- an add-on's fixtures come from nnx.testing alone ----------------------------------


def _example_model() -> nnx.NNModel:
    # nnx.testing's tiny data has 4 features and 3 classes.
    params = ExampleMLPParams(input_dim=4, output_dim=3, scale=2.0)
    return tiny_model(seed=0, net=Nets.EXAMPLE_MLP, net_params=params)


def test_example_net_trains_on_the_shared_tiny_data(tmp_path: Path) -> None:
    model = _example_model()
    assert isinstance(model.net, ExampleMLP)
    before = weights(model)
    run = model.train(tiny_train_params(tiny_batches(), n_epochs=1), root=tmp_path / "runs",
                      verbose=False)
    assert (tmp_path / "runs" / run.id / "run.yaml").is_file()
    after = weights(model)
    assert any(not torch.equal(before[k], after[k]) for k in before)
    record = model.evaluate(tiny_loader())
    assert record.loss is not None and math.isfinite(record.loss)


def test_example_net_run_id_is_reproducible_from_the_shared_fixtures(tmp_path: Path) -> None:
    first = _example_model().train(tiny_train_params(), root=tmp_path / "a", verbose=False)
    second = _example_model().train(tiny_train_params(), root=tmp_path / "b", verbose=False)
    assert first.id == second.id
