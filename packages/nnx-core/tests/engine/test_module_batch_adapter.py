"""A module's own ``batch_adapter()`` (spec §3.2 batch adapters; the seam nnx-graph's node
nets use to refuse link batches by name, issue 39): NNModel takes the adapter it returns,
before the module's ``unpack_batch``; an explicit ``batch_adapter=`` still wins."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from nnx import BatchAdapter, KeywordInputs, NNModel, PositionalInputs


class Scorer(nn.Module):
    def __init__(self, adapter: Any = None) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 1)
        self.adapter = adapter

    def batch_adapter(self) -> Any:
        return self.adapter

    def unpack_batch(self, batch: Any) -> tuple[tuple[Any, ...], Any]:
        raise AssertionError("batch_adapter() comes first")

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.lin(features)


def test_the_module_s_own_adapter_is_used_before_its_unpack_batch() -> None:
    adapter = KeywordInputs(("features",), target="y")
    model = NNModel(module=Scorer(adapter))
    assert model.batch_adapter is adapter
    inputs, target = model.split_batch({"features": torch.ones(2, 3), "y": torch.zeros(2)})
    assert inputs.kwargs.keys() == {"features"} and torch.equal(target, torch.zeros(2))


def test_an_explicit_adapter_still_wins() -> None:
    explicit = PositionalInputs()
    assert NNModel(module=Scorer(KeywordInputs("features")),
                   batch_adapter=explicit).batch_adapter is explicit


def test_an_answer_that_is_not_an_adapter_is_refused() -> None:
    with pytest.raises(TypeError, match=r"Scorer.batch_adapter\(\) must return a BatchAdapter"):
        NNModel(module=Scorer(object()))
    assert isinstance(NNModel(module=Scorer(PositionalInputs())).batch_adapter, BatchAdapter)
