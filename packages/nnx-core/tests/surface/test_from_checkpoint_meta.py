"""NNModel.from_checkpoint builds the net on the meta device first (issue 12, spec §3.2):
a checkpoint whose recorded configuration describes another net is refused, naming the
checkpoint and the first differing tensors, before that net is allocated; a valid one
reloads exactly as a plain build would (same weights, same RNG streams afterwards)."""

from __future__ import annotations

import dataclasses
import resource

import pytest
import torch

from nnx import CheckpointReadError, NNCheckpoint, NNModel, NNModelParams, NNParams
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


def test_a_net_size_torch_cannot_count_is_named_not_a_raw_overflow(last):
    # 2**62 rows: the meta build itself overflows torch's size arithmetic (a raw
    # "Storage size calculation overflowed" RuntimeError naming no file, before).
    forged = dataclasses.replace(last, net={**last.net, "hidden_dims": [2**62]})
    rng = torch.get_rng_state()
    with pytest.raises(CheckpointReadError, match=r"^cannot read checkpoint .*last\.pt: the "
                       r"net its configuration declares cannot be built \(RuntimeError: "
                       r".*overflow.*nothing was loaded") as info:
        NNModel.from_checkpoint(forged)
    assert info.value.path == last.path and "\n" not in str(info.value)
    assert torch.equal(torch.get_rng_state(), rng)
    unsaved = dataclasses.replace(forged, path=None)
    with pytest.raises(ValueError, match=rf"^checkpoint 'last' of run {last.run_id}: the net "
                       r"its configuration declares cannot be built \(RuntimeError"):
        NNModel.from_checkpoint(unsaved)


def test_a_mismatched_built_in_net_is_also_the_runtime_error_spec_3_2_names(last):
    """§3.2: built-in nets surface "the RuntimeError of load_state_dict"; the early,
    allocation-free check raises one that is a RuntimeError and still a ValueError."""
    unsaved = dataclasses.replace(last, path=None, net={**last.net, "hidden_dims": [5]})
    with pytest.raises(RuntimeError, match=r"layers\.0\.weight \(8, 4\) vs \(5, 4\)") as err:
        NNModel.from_checkpoint(unsaved)
    assert isinstance(err.value, ValueError)  # existing `except ValueError` callers still work


def test_a_registered_factory_mismatch_stays_a_value_error_only(tmp_path):
    """§3.2: "A factory that now builds another topology fails with ValueError"."""
    from torch import nn

    from nnx import Losses, ModelSpec, register_model_factory

    register_model_factory("test.meta.narrow", 1,
                           lambda config: nn.Sequential(nn.Linear(4, config["width"]),
                                                        nn.ReLU(), nn.Linear(config["width"], 3)))
    model = NNModel(params=NNModelParams(net=ModelSpec("test.meta.narrow", 1, {"width": 8},
                                                       seed=0), loss=Losses.CROSS_ENTROPY))
    run = model.train(tiny_train_params(), verbose=False, root=tmp_path)
    last = NNCheckpoint.load(run.id, "last", root=tmp_path)
    forged = dataclasses.replace(last, model={**last.model, "net": {
        **dict(last.model["net"]), "config": {"width": 5}}})
    with pytest.raises(ValueError, match="do not fit") as err:
        NNModel.from_checkpoint(forged)
    assert not isinstance(err.value, RuntimeError)


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


def test_an_rng_snapshot_taken_under_the_meta_device_context_stays_on_the_cpu():
    from nnx._foundation.seeding import capture_rng_state, restore_rng_state

    with torch.device("meta"):
        snapshot = capture_rng_state()
        restore_rng_state(snapshot)  # used to fail: "Cannot copy out of meta tensor"
    assert snapshot["python"][1].device.type == "cpu"


def test_a_forged_registered_config_is_refused_before_the_factory_allocates(tmp_path):
    from torch import nn

    from nnx import ModelSpec, register_model_factory
    from nnx.enums.losses import Losses

    register_model_factory("test.meta.wide", 1,
                           lambda config: nn.Sequential(nn.Linear(4, config["width"]),
                                                        nn.ReLU(), nn.Linear(config["width"], 3)))
    model = NNModel(params=NNModelParams(net=ModelSpec("test.meta.wide", 1, {"width": 8}, seed=0),
                                         loss=Losses.CROSS_ENTROPY))
    run = model.train(tiny_train_params(), verbose=False, root=tmp_path)
    last = NNCheckpoint.load(run.id, "last", root=tmp_path)
    spec = dict(last.model["net"])
    forged = dataclasses.replace(last, model={**last.model,
                                              "net": {**spec, "config": {"width": 2_000_000_000}}})
    rng = torch.get_rng_state()
    before = _peak_mib()
    with pytest.raises(ValueError, match=r"do not fit .*0\.weight \(8, 4\) vs \(2000000000, 4\)"):
        NNModel.from_checkpoint(forged)  # a real build would need 32 GB for one layer
    assert _peak_mib() - before < 256
    assert torch.equal(torch.get_rng_state(), rng)
    assert torch.equal(NNModel.from_checkpoint(last).net.state_dict()["0.weight"],
                       last.state_dict["0.weight"])
