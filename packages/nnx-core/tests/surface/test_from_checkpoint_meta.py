"""NNModel.from_checkpoint builds the net on the meta device first (issue 12, spec §3.2):
a checkpoint whose recorded configuration describes another net is refused, naming the
checkpoint and the first differing tensors, before that net is allocated; a valid one
reloads exactly as a plain build would (same weights, same RNG streams afterwards)."""

from __future__ import annotations

import dataclasses
import resource

import pytest
import torch
from torch import nn

from nnx import ModelSpec, NNCheckpoint, NNModel, NNModelParams, NNParams
from nnx.models import register_model_factory, unregister_model_factory
from nnx.testing import tiny_model, tiny_train_params


@pytest.fixture
def last(tmp_path) -> NNCheckpoint:
    run = tiny_model().train(tiny_train_params(), verbose=False, root=tmp_path)
    return NNCheckpoint.load(run.id, "last", root=tmp_path)


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def test_a_forged_net_size_is_refused_before_it_is_allocated(last):
    forged = dataclasses.replace(last, net={**last.net, "hidden_dims": [1_000_000, 1_000_000]})
    rng = torch.get_rng_state()
    before = _peak_mib()
    # A real build would need 4 TB for the middle layer alone (torch would raise its
    # allocation RuntimeError, or the machine swap); the meta build needs no storage.
    with pytest.raises(ValueError, match=r"^checkpoint .*last\.pt: the saved weights do not "
                       r"fit the module .*'layers\.0\.weight \(8, 4\) vs \(1000000, 4\)'"
                       r".*nothing was loaded"):
        NNModel.from_checkpoint(forged)
    assert _peak_mib() - before < 256
    assert torch.equal(torch.get_rng_state(), rng)


def test_a_mismatched_built_in_net_is_a_value_error_naming_an_unsaved_checkpoint(last):
    unsaved = dataclasses.replace(last, path=None, net={**last.net, "hidden_dims": [5]})
    with pytest.raises(ValueError, match=rf"^checkpoint 'last' of run {last.run_id}: .*"
                       r"layers\.0\.weight \(8, 4\) vs \(5, 4\)"):
        NNModel.from_checkpoint(unsaved)


def test_a_valid_checkpoint_reloads_as_a_plain_build_would(last):
    params = NNModelParams.from_state(last.model)
    net_params = NNParams.resolve_from_state(last.net, params.net)
    torch.manual_seed(11)
    rebuilt = NNModel.from_checkpoint(last)
    after_reload = torch.get_rng_state()
    torch.manual_seed(11)
    NNModel(net_params=net_params, params=params)  # what the reload used to do, alone
    assert torch.equal(after_reload, torch.get_rng_state())
    assert rebuilt.net.state_dict().keys() == last.state_dict.keys()
    for key, value in last.state_dict.items():
        assert torch.equal(rebuilt.net.state_dict()[key], value)
        assert rebuilt.net.state_dict()[key].device.type == "cpu"


class _Wide(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.body = nn.Linear(3, width)
        self.head = nn.Linear(width, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.head(self.body(x))
        return out


class _ReadsAtInit(_Wide):
    """A factory that reads a value it just created: it cannot run on the meta device."""

    def __init__(self, width: int) -> None:
        super().__init__(width)
        self.scale = float(self.body.weight.abs().max().item())


@pytest.fixture
def factories():
    register_model_factory("test.wide", 1, lambda config: _Wide(config["width"]))
    register_model_factory("test.reads", 1, lambda config: _ReadsAtInit(config["width"]))
    yield
    unregister_model_factory("test.wide", 1)
    unregister_model_factory("test.reads", 1)


def _registered(tmp_path, factory: str) -> NNCheckpoint:
    model = NNModel(params=NNModelParams(net=ModelSpec(factory, 1, {"width": 4}, seed=0)))
    batches = [(torch.randn(4, 3), torch.randint(0, 2, (4,)))]
    run = model.train(tiny_train_params(batches), verbose=False, root=tmp_path)
    return NNCheckpoint.load(run.id, "last", root=tmp_path)


def test_a_forged_registered_config_is_refused_before_its_factory_builds_for_real(
        tmp_path, factories, monkeypatch):
    last = _registered(tmp_path, "test.wide")
    spec = dict(last.model["net"])
    forged = dataclasses.replace(last, model={**last.model, "net": {
        **spec, "config": {"width": 10_000_000}}})

    def no_real_build(*args, **kwargs):
        raise AssertionError("nothing may be built for real before the shapes are compared")

    with monkeypatch.context() as patched:
        patched.setattr("nnx._surface.model.build_net", no_real_build)
        with pytest.raises(ValueError, match=r"body\.weight \(4, 3\) vs \(10000000, 3\)"):
            NNModel.from_checkpoint(forged)
    rebuilt = NNModel.from_checkpoint(last)
    assert all(torch.equal(rebuilt.net.state_dict()[k], v) for k, v in last.state_dict.items())


def test_a_factory_that_cannot_run_on_the_meta_device_still_reloads(tmp_path, factories):
    last = _registered(tmp_path, "test.reads")
    rebuilt = NNModel.from_checkpoint(last)
    assert all(torch.equal(rebuilt.net.state_dict()[k], v) for k, v in last.state_dict.items())
