"""Fine-tuning: freeze by glob, load_pretrained with key_map, export (§7)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
import struct
import warnings
from collections import OrderedDict

import pytest
import torch
from torch import nn

from nnx import CheckpointReadError, NNModel, NNModelParams
from nnx.finetune import (
    LoadResult,
    export_state_dict,
    freeze,
    frozen,
    load_pretrained,
    unfreeze,
)


class Stack(nn.Module):
    """FeedFwdNN-like naming: layers.0, layers.1, ... plus a BatchNorm buffer set."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.layers = nn.ModuleList([nn.Linear(4, 3), nn.Linear(3, 2)])
        self.norm = nn.BatchNorm1d(2)


class Backbone(nn.Module):
    """A "foreign" pretrained model whose block is named backbone.* instead of layers.*."""

    def __init__(self, seed: int = 1) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.backbone = nn.ModuleList([nn.Linear(4, 3), nn.Linear(3, 2)])
        self.norm = nn.BatchNorm1d(2)


def snapshot(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def assert_same(module: nn.Module, before: dict[str, torch.Tensor]) -> None:
    after = module.state_dict()
    assert after.keys() == before.keys()
    for key, value in before.items():
        assert torch.equal(after[key], value), key


# --- freeze / unfreeze / frozen ------------------------------------------------------


def test_spec_example_freeze_first_block_then_unfreeze_all():
    model = Stack()
    assert freeze(model, "layers.0.*") == ["layers.0.weight", "layers.0.bias"]
    assert frozen(model) == ["layers.0.weight", "layers.0.bias"]
    assert model.layers[1].weight.requires_grad
    assert unfreeze(model, "*") == ["layers.0.weight", "layers.0.bias"]
    assert frozen(model) == []


def test_freeze_reports_only_changed_names_and_is_case_sensitive():
    model = Stack()
    freeze(model, "layers.0.weight")
    assert freeze(model, "layers.0.*", "*.bias") == [
        "layers.0.bias", "layers.1.bias", "norm.bias",
    ]
    with pytest.raises(ValueError, match=r"'LAYERS\.\*'"):
        freeze(model, "LAYERS.*")


def test_unmatched_pattern_refused_before_anything_changes():
    model = Stack()
    with pytest.raises(ValueError, match=r"'encoder\.\*' match no parameter.*layers\.0\.weight"):
        freeze(model, "layers.0.*", "encoder.*")
    assert frozen(model) == []  # the valid pattern was not applied either


@pytest.mark.parametrize("patterns", [(), ("",), (None,), (3,)])
def test_bad_patterns_refused(patterns):
    model = Stack()
    with pytest.raises(ValueError, match="pattern"):
        freeze(model, *patterns)
    assert frozen(model) == []


def test_tied_parameter_matched_by_alias_reported_by_canonical_name():
    model = nn.Module()
    model.encoder = nn.Linear(2, 2, bias=False)
    model.decoder = nn.Linear(2, 2, bias=False)
    model.decoder.weight = model.encoder.weight
    assert freeze(model, "decoder.*") == ["encoder.weight"]
    assert not model.encoder.weight.requires_grad


def test_unfreeze_skips_integer_parameters():
    model = nn.Module()
    model.steps = nn.Parameter(torch.zeros(2, dtype=torch.long), requires_grad=False)
    model.w = nn.Parameter(torch.zeros(2), requires_grad=False)
    assert unfreeze(model, "*") == ["w"]
    assert frozen(model) == ["steps"]


# --- load_pretrained -----------------------------------------------------------------

KEY_MAP = {"backbone.": "layers."}


def expected_after_map(source: nn.Module) -> dict[str, torch.Tensor]:
    return {k.replace("backbone.", "layers."): v for k, v in source.state_dict().items()}


@pytest.mark.parametrize("kind", ["dict", "file", "module"])
def test_load_pretrained_with_key_map_from_each_source(kind, tmp_path):
    pretrained, model = Backbone(), Stack()
    pretrained.norm.running_mean.fill_(0.25)
    source: object = pretrained
    if kind == "dict":
        source = pretrained.state_dict()
    elif kind == "file":
        source = tmp_path / "pretrained.pt"
        torch.save(pretrained.state_dict(), source)
    result = load_pretrained(model, source, key_map=KEY_MAP)
    assert isinstance(result, LoadResult)
    assert set(result.loaded_keys) == set(model.state_dict())
    assert result.missing_keys == result.unexpected_keys == result.mismatched_keys == ()
    assert_same(model, expected_after_map(pretrained))


def test_load_pretrained_keeps_frozen_flags():
    model = Stack()
    freeze(model, "layers.0.*")
    load_pretrained(model, Backbone(), key_map=KEY_MAP)
    assert frozen(model) == ["layers.0.weight", "layers.0.bias"]


def test_strict_refusal_lists_every_problem_and_changes_nothing():
    model, source = Stack(), Backbone().state_dict()
    source["backbone.1.weight"] = torch.zeros(5, 3)  # mismatched shape
    del source["norm.bias"]  # missing
    source["head.weight"] = torch.zeros(1)  # unexpected
    before = snapshot(model)
    with pytest.raises(ValueError) as info:
        load_pretrained(model, source, key_map=KEY_MAP)
    message = str(info.value)
    assert "3 problem(s), nothing was loaded" in message
    assert "shape mismatch layers.1.weight (source 'backbone.1.weight'): source (5, 3)" in message
    assert "missing norm.bias" in message and "unexpected head.weight" in message
    assert_same(model, before)


def test_non_strict_loads_matches_and_reports_the_rest():
    pretrained, model = Backbone(), Stack()
    source = pretrained.state_dict()
    source["backbone.1.weight"] = torch.zeros(5, 3)
    del source["norm.bias"]
    source["head.weight"] = torch.zeros(1)
    before = snapshot(model)
    result = load_pretrained(model, source, strict=False, key_map=KEY_MAP)
    assert result.mismatched_keys == ("layers.1.weight",)
    assert result.missing_keys == ("norm.bias",)
    assert result.unexpected_keys == ("head.weight",)  # the source's own name
    assert "layers.0.weight" in result.loaded_keys and "layers.1.weight" not in result.loaded_keys
    state = model.state_dict()
    assert torch.equal(state["layers.0.weight"], pretrained.backbone[0].weight)
    assert torch.equal(state["layers.1.weight"], before["layers.1.weight"])  # never loaded
    assert torch.equal(state["norm.bias"], before["norm.bias"])


def test_forgotten_key_map_loads_nothing_warns_and_reports():
    model = Stack()
    source = {k: v for k, v in Backbone().state_dict().items() if k.startswith("backbone.")}
    before = snapshot(model)
    with pytest.warns(RuntimeWarning, match="loaded no tensors"):
        result = load_pretrained(model, source, strict=False)
    assert result.loaded_keys == ()
    assert result.unexpected_keys == tuple(source)
    assert set(result.missing_keys) == set(model.state_dict())
    assert_same(model, before)


def test_key_map_longest_prefix_wins_and_collisions_refused():
    model = Stack()
    source = {"enc.w0.weight": torch.ones(3, 4), "enc.weight": torch.ones(3, 4)}
    result = load_pretrained(
        model, source, strict=False, key_map={"enc.": "x.", "enc.w0.": "layers.0."}
    )
    assert result.loaded_keys == ("layers.0.weight",)
    assert result.unexpected_keys == ("enc.weight",)
    before = snapshot(model)
    with pytest.raises(ValueError, match="sends both"):
        load_pretrained(model, {"a.w": torch.ones(1), "b.w": torch.ones(1)},
                        key_map={"a.": "c.", "b.": "c."})
    assert_same(model, before)


def test_non_state_dict_sources_refused(tmp_path):
    model = Stack()
    before = snapshot(model)
    wrapper = tmp_path / "ckpt.pt"
    torch.save({"state_dict": model.state_dict(), "epoch": 3}, wrapper)
    with pytest.raises(ValueError, match="nested state dict"):
        load_pretrained(model, wrapper)
    with pytest.raises(ValueError, match="state dict"):
        load_pretrained(model, [torch.ones(1)])  # type: ignore[arg-type]
    with pytest.raises(FileNotFoundError):
        load_pretrained(model, tmp_path / "absent.pt")
    assert_same(model, before)


class _Declared:
    """Pickles as a tensor of ``size`` over a 4-element storage: what a crafted .pt holds."""

    def __init__(self, size: tuple[int, ...]) -> None:
        self.size = size

    def __reduce__(self):
        stride = tuple(int(math.prod(self.size[i + 1:])) for i in range(len(self.size)))
        return (torch._utils._rebuild_tensor_v2,
                (torch.zeros(4).storage(), 0, self.size, stride, False, OrderedDict()))


def _safetensors_declaring(path, shape: list[int]) -> None:
    header = json.dumps({"layers.0.weight": {"dtype": "F32", "shape": shape,
                                             "data_offsets": [0, 16]}}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))


@pytest.mark.parametrize("shape", [[2**62, 2**62], [2**31, 2**31]])
def test_a_file_declaring_a_size_that_overflows_is_named_not_a_raw_overflow(tmp_path, shape):
    model = Stack()
    before = snapshot(model)
    pt, st = tmp_path / "huge.pt", tmp_path / "huge.safetensors"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage is deprecated; the file is the point
        torch.save({"layers.0.weight": _Declared(tuple(shape))}, pt)
    _safetensors_declaring(st, shape)
    for path, cause in ((pt, "RuntimeError: .*overflow"), (st, "SafetensorError: .*overflow")):
        files = sorted(tmp_path.iterdir())
        with pytest.raises(CheckpointReadError, match=rf"^cannot read checkpoint "
                           rf"{re.escape(path.as_posix())}: {cause}") as info:
            load_pretrained(model, path)
        assert info.value.path == path and "\n" not in str(info.value)
        assert sorted(tmp_path.iterdir()) == files
    assert_same(model, before)
    with pytest.raises(CheckpointReadError, match=r"holds a list, not a state dict"):
        torch.save([torch.ones(1)], tmp_path / "list.pt")
        load_pretrained(model, tmp_path / "list.pt")
    assert_same(model, before)


# --- export_state_dict ---------------------------------------------------------------


def test_export_state_dict_round_trips_plain_state_dict(tmp_path):
    model = Stack()
    target = tmp_path / "weights.pt"
    target.write_bytes(b"old")  # replaced, not appended to
    written = export_state_dict(model, target)
    assert written == target.resolve()
    loaded = torch.load(target, weights_only=True)
    assert list(loaded) == list(model.state_dict())  # no wrapper keys
    other = Stack(seed=5)
    load_pretrained(other, target)
    assert_same(other, snapshot(model))
    assert sorted(os.listdir(tmp_path)) == ["weights.pt"]  # no temp file left behind


def test_export_state_dict_writes_safetensors_by_extension(tmp_path):
    # A .safetensors name gets a safetensors file the safetensors reader opens, as
    # checkpoints choose their format by suffix; the tensors equal the net's.
    from safetensors import safe_open

    model = NNModel(module=Stack(), params=NNModelParams())  # BatchNorm buffers included
    target = tmp_path / "w.safetensors"
    assert model.export_state_dict(target) == target.resolve()
    expected = model.net.state_dict()
    with safe_open(str(target), framework="pt", device="cpu") as handle:
        names = list(handle.keys())
        read = {name: handle.get_tensor(name) for name in names}
    assert sorted(names) == sorted(expected)  # no wrapper keys
    for name, tensor in expected.items():
        assert torch.equal(read[name], tensor), name
    other = Stack(seed=5)
    load_pretrained(other, target)  # and NNx reads it back the same way
    assert_same(other, snapshot(model.net))
    assert sorted(os.listdir(tmp_path)) == ["w.safetensors"]  # no temp file left behind


def test_load_result_is_frozen():
    result = LoadResult((), (), (), ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.loaded_keys = ("x",)  # type: ignore[misc]
