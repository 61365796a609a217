"""Spec §16: NNModel.train refuses a built-in or registered net still carrying pruning
masks or a weight_norm / spectral_norm parametrization (or legacy hook), since its
checkpoints could not be reloaded; it raises UnreloadableNetError before a run directory
exists and leaves the net as it was. A wrapped module (module=...) may carry them."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _nnx_core_tiny import tiny_model, tiny_train_params
from torch.nn.utils import parametrizations, prune

from nnx import NNModel, NNModelParams
from nnx.extend import UnreloadableNetError, reload_blockers


def _prune(net: torch.nn.Module) -> None:
    prune.l1_unstructured(net.layers[0], "weight", amount=0.5)


def _weight_norm(net: torch.nn.Module) -> None:
    parametrizations.weight_norm(net.layers[0])


def _spectral_norm(net: torch.nn.Module) -> None:
    parametrizations.spectral_norm(net.layers[0])


def _legacy_weight_norm(net: torch.nn.Module) -> None:
    torch.nn.utils.weight_norm(net.layers[0])


def _legacy_spectral_norm(net: torch.nn.Module) -> None:
    torch.nn.utils.spectral_norm(net.layers[0])


@pytest.mark.parametrize("change, what", [
    (_prune, "layers.0.weight: pruning mask"),
    (_weight_norm, "layers.0.weight: weight_norm parametrization"),
    (_spectral_norm, "layers.0.weight: spectral_norm parametrization"),
    (_legacy_weight_norm, "layers.0.weight: weight_norm (legacy hook)"),
    (_legacy_spectral_norm, "layers.0.weight: spectral_norm (legacy hook)"),
])
def test_train_refuses_a_built_in_net_with_a_reload_blocker(tmp_path: Path, change,
                                                             what: str) -> None:
    model = tiny_model()
    change(model.net)
    assert reload_blockers(model.net) == [what]
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    with pytest.raises(UnreloadableNetError, match="remove_parametrizations"):
        model.train(tiny_train_params(), root=tmp_path, verbose=False, salt="variant")
    assert not any(tmp_path.iterdir())  # no run reserved
    after = model.net.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], v) for k, v in before.items())


def test_a_plain_or_removed_net_has_no_blocker_and_a_wrapped_module_may_carry_one(
        tmp_path: Path) -> None:
    model = tiny_model()
    assert reload_blockers(model.net) == []
    _prune(model.net)
    prune.remove(model.net.layers[0], "weight")
    assert reload_blockers(model.net) == []
    module = torch.nn.Sequential(torch.nn.Linear(4, 3))
    prune.l1_unstructured(module[0], "weight", amount=0.5)
    wrapped = NNModel(module=module, params=NNModelParams())
    run = wrapped.train(tiny_train_params(), root=tmp_path, verbose=False)
    assert run.path.exists()
