"""NNx's own safetensors codec (spec §22, Format v1): any safetensors reader opens what
NNx writes, NNx reads what the library writes, and a header that breaks a rule is
refused before any tensor is built."""

from __future__ import annotations

import json

import pytest
import safetensors.torch
import torch

from nnx._persistence import safetensors_codec as codec
from nnx.bundles import model_fingerprint


def _tensors() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {
        "f32": torch.randn(3, 4, generator=g), "f64": torch.randn(2, generator=g).double(),
        "f16": torch.randn(5, generator=g).half(),
        "bf16": torch.randn(2, 2, generator=g).bfloat16(),
        "i64": torch.arange(7), "i32": torch.arange(3, dtype=torch.int32),
        "u8": torch.arange(4, dtype=torch.uint8), "i8": torch.tensor([-1, 2], dtype=torch.int8),
        "bool": torch.tensor([True, False, True]), "scalar": torch.tensor(2.5),
        "empty": torch.empty(0, 3), "strided": torch.randn(4, 4, generator=g).t(),
    }


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert set(a) == set(b)
    for name in a:
        assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
        assert torch.equal(a[name], b[name]), name


def test_round_trip_every_dtype():
    tensors = _tensors()
    _same(codec.decode(codec.encode(tensors), "t"), tensors)


def test_the_safetensors_library_reads_nnx_payloads_identically():
    tensors = _tensors()
    data = codec.encode(tensors, metadata={"k": "v"})
    _same(safetensors.torch.load(data), tensors)
    assert (8 + int.from_bytes(data[:8], "little")) % 8 == 0  # header padded to 8 bytes


def test_nnx_reads_the_librarys_payloads():
    tensors = {k: v.contiguous() for k, v in _tensors().items()}
    _same(codec.decode(safetensors.torch.save(tensors), "t"), tensors)


def _with_header(header: dict, body: bytes) -> bytes:
    text = json.dumps(header).encode()
    return len(text).to_bytes(8, "little") + text + body


@pytest.mark.parametrize(("data", "match"), [
    (b"\x01\x02", "too short"),
    ((10**9).to_bytes(8, "little") + b"{}", "header"),
    (_with_header({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 4),
     "cover"),
    (_with_header({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                   "b": {"dtype": "F32", "shape": [1], "data_offsets": [2, 6]}}, b"\0" * 6),
     "contiguous"),
    (_with_header({"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
     "contiguous"),
    (_with_header({"a": {"dtype": "X9", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
     "unknown dtype"),
    (_with_header({"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 4]}}, b"\0" * 4),
     "holds 4 bytes"),
    (_with_header({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4),
     "shape"),
    (_with_header({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 9),
     "cover"),
])
def test_header_rules_refuse_before_any_tensor(data, match, monkeypatch):
    monkeypatch.setattr(torch, "frombuffer", _never)
    with pytest.raises(ValueError, match=match):
        codec.decode(data, "payload")


def test_a_duplicate_header_key_is_refused():
    entry = b'{"dtype":"U8","shape":[1],"data_offsets":[0,1]}'
    text = b'{"a":' + entry + b',"a":' + entry + b"}"
    data = len(text).to_bytes(8, "little") + text + b"\0"
    with pytest.raises(ValueError, match="repeats the key 'a'"):
        codec.read_header(data, "payload")


def _never(*args, **kwargs):
    raise AssertionError("a tensor was built")


def test_the_fingerprint_of_a_payload_equals_the_weights_in_memory(monkeypatch):
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    data = codec.encode(net.state_dict())
    expected = model_fingerprint(net)
    assert expected.startswith("sha256:") and len(expected) == 71
    monkeypatch.setattr(torch, "frombuffer", _never)  # hashed from bytes: no tensor
    assert codec.payload_fingerprint(data, "model.safetensors") == expected
    with torch.no_grad():
        net[0].weight[0, 0] += 1
    assert model_fingerprint(net) != expected  # it changes whenever the weights do


class _Wrapped(torch.Tensor):
    """A tensor subclass standing in for torchao's quantized weights."""


def test_a_tensor_subclass_is_unstorable_and_a_parameter_is_not():
    plain = torch.ones(2, 3)
    assert codec.unstorable(plain) is None
    assert codec.unstorable(torch.nn.Parameter(plain)) is None
    assert "_Wrapped tensor subclass" in codec.unstorable(plain.as_subclass(_Wrapped))
    with pytest.raises(TypeError, match="tensor subclass"):
        codec.encode({"w": plain.as_subclass(_Wrapped)})
