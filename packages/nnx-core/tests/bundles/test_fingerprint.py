"""model_fingerprint (spec §18 model ids, §22): every weight of what it is given counts,
so a wrapper whose head changes gets another id (issue 36, item 7), while an NNModel's
id stays the digest a bundle computes from its model.safetensors payload."""

from __future__ import annotations

import pytest
import torch
from _support.bundles import live_generation, model, train
from torch import nn

from nnx._persistence import safetensors_codec as codec
from nnx.bundles import export_bundle, model_fingerprint


class _Wrapper(nn.Module):
    """A backbone under ``net`` and a head beside it: both shape the outputs."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Linear(3, 4)
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.net(x))


class _Holder:
    """Not a module: an object holding a net and, beside it, a head and a scale."""

    def __init__(self) -> None:
        wrapper = _Wrapper()
        self.net, self.head = wrapper.net, wrapper.head
        self.scale = torch.ones(2)


def test_a_wrapper_whose_head_changes_gets_another_fingerprint():
    wrapper = _Wrapper()
    before = model_fingerprint(wrapper)
    assert before == model_fingerprint(_Wrapper())  # same weights, same id
    with torch.no_grad():
        wrapper.head.bias += 1.0
    assert model_fingerprint(wrapper) != before
    assert model_fingerprint(wrapper.net) == model_fingerprint(_Wrapper().net)


def test_state_beside_the_net_of_a_model_object_counts():
    holder = _Holder()
    before = model_fingerprint(holder)
    assert before != model_fingerprint(holder.net)  # the head and scale are hashed too
    with torch.no_grad():
        holder.head.weight.mul_(2)
    changed_head = model_fingerprint(holder)
    holder.scale = torch.full((2,), 3.0)
    assert len({before, changed_head, model_fingerprint(holder)}) == 3


def test_an_nnmodel_is_its_nets_weights_as_the_bundle_hashes_them(tmp_path):
    source = model()
    assert model_fingerprint(source) == model_fingerprint(source.net.state_dict())
    source.loss_fn = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 3.0]))
    assert model_fingerprint(source) == model_fingerprint(source.net)  # a loss scores only
    run = train(tmp_path / "runs", n_epochs=1)
    from nnx import NNModel

    trained = NNModel.from_checkpoint(tmp_path / "runs" / run.id / "checkpoints" / "last.pt")
    export_bundle(run.id, tmp_path / "b", root=tmp_path / "runs")
    payload = (live_generation(tmp_path / "b") / "model.safetensors").read_bytes()
    assert model_fingerprint(trained) == codec.payload_fingerprint(payload, "model")


def test_what_is_neither_a_model_nor_weights_is_refused():
    with pytest.raises(TypeError, match="needs a model, a module or a state dict"):
        model_fingerprint(object())
