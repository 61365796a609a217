"""Tensor-subclass weights in a bundle (spec §22: a QAT-converted LAST is bundled):
stored as plain inner tensors, rebuilt only on the template the replayed recipe makes,
and a state.json whose ``flattened_weights`` does not fit the schema is refused."""

from __future__ import annotations

import shutil

import pytest
import torch
from _support.bundles import rewrite_state, state, trained_bundle
from torch.testing._internal.two_tensor import TwoTensor

from nnx._persistence.flattened_tensor import (
    FlattenedTensor,
    FlattenedTensorError,
    flatten_subclass,
    restore_flattened,
)
from nnx.bundles import BundleValidationError, validate_bundle


def _pair(seed: int) -> TwoTensor:
    g = torch.Generator().manual_seed(seed)
    return TwoTensor(torch.randn(2, 3, generator=g), torch.randn(2, 3, generator=g))


def test_a_subclass_round_trips_through_its_inner_tensors_on_the_template() -> None:
    stored = flatten_subclass(_pair(0), "weights.w")
    assert stored.kind == "torch.testing._internal.two_tensor.TwoTensor"
    assert sorted(stored.inner) == ["a", "b"] and stored.shape == torch.Size([2, 3])
    template = {"w": _pair(1), "bias": torch.zeros(2)}
    out = restore_flattened({"w": stored, "bias": torch.ones(2)}, template, "here")
    assert type(out["w"]) is TwoTensor and torch.equal(out["bias"], torch.ones(2))
    assert torch.equal(out["w"].a, _pair(0).a) and torch.equal(out["w"].b, _pair(0).b)


@pytest.mark.parametrize("change, match", [
    ({"kind": "elsewhere.Other"}, "elsewhere.Other"),
    ({"meta": "{'block_size': 4}"}, "block_size"),
    ({"size": (3, 2)}, r"\(3, 2\)"),
])
def test_a_stored_entry_unlike_the_template_is_refused_before_any_is_built(
        change, match) -> None:
    stored = flatten_subclass(_pair(0), "weights.w")
    fields = {"kind": stored.kind, "meta": stored.meta, "size": stored.size,
              "inner": stored.inner, **change}
    with pytest.raises(FlattenedTensorError, match=match):
        restore_flattened({"w": FlattenedTensor(**fields)}, {"w": _pair(1)}, "here")


def test_an_inner_tensor_of_another_dtype_or_a_plain_template_is_refused() -> None:
    stored = flatten_subclass(_pair(0), "weights.w")
    wrong = FlattenedTensor(stored.kind, stored.meta, stored.size,
                            {"a": stored.inner["a"].double(), "b": stored.inner["b"]})
    with pytest.raises(FlattenedTensorError, match="float64"):
        restore_flattened({"w": wrong}, {"w": _pair(1)}, "here")
    with pytest.raises(FlattenedTensorError, match="rebuilt as a plain tensor"):
        restore_flattened({"w": stored}, {"w": torch.zeros(2, 3)}, "here")


def test_a_subclass_that_does_not_flatten_is_named() -> None:
    class Opaque(torch.Tensor):
        pass

    with pytest.raises(ValueError, match="does not flatten"):
        flatten_subclass(torch.zeros(2).as_subclass(Opaque), "weights.w")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return trained_bundle(tmp_path_factory.mktemp("flat"))[0]


def test_a_plain_bundle_has_no_flattened_weights(exported) -> None:
    assert "flattened_weights" not in state(exported)


@pytest.mark.parametrize("entry", [
    {},  # present but empty
    {"layers.0.weight": {"type": "t", "meta": "m", "size": [8, 4],
                         "inner": {"q": {"$tensor": "model:layers.0.weight#q"}}}},  # also plain
    {"w": {"type": "t", "meta": "m", "size": [8, 4],
           "inner": {"q": {"$tensor": "model:other#q"}}}},  # not its own name
    {"w": {"type": "t", "meta": "m", "size": [-1],
           "inner": {"q": {"$tensor": "model:w#q"}}}},
    {"w": {"type": "t", "meta": "m", "size": [1], "inner": {}}},
    {"w": {"type": "t", "meta": "m", "size": [1], "extra": 1,
           "inner": {"q": {"$tensor": "model:w#q"}}}},
])
def test_a_flattened_entry_that_does_not_fit_the_schema_is_refused(exported, tmp_path,
                                                                    entry) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    value = state(copy)
    value["flattened_weights"] = entry
    rewrite_state(copy, value)
    with pytest.raises(BundleValidationError, match="flattened_weights"):
        validate_bundle(copy)
