"""NNx's own safetensors codec: the run bundle's tensor payloads (spec §22).

The format: an 8-byte little-endian header length N, N bytes of JSON
``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``,
then the raw little-endian bytes, offsets relative to the end of the header.
A bundle comes from anywhere, so reading is strict, and every check runs on the
header before a tensor is built: the length bounded and inside the file, the JSON
strict (:func:`nnx._foundation.bounded.load_json`), each dtype known, each
extent ``prod(shape) * itemsize`` bytes, the extents contiguous from 0 to the
end of the file with no gap or overlap. Any safetensors reader opens what
:func:`encode` writes (tests/bundles prove it against the ``safetensors``
library), and nothing here imports that library.

:func:`payload_fingerprint` hashes a payload's weights from the header and the
raw bytes alone (no tensor is built); :func:`tensors_fingerprint` gives the same
digest for tensors in memory. It is the ``model_fingerprint`` of spec §18.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from nnx._foundation.bounded import load_json
from nnx._foundation.hashing import canonical_bytes
from nnx._persistence.flattened_tensor import inner_tensors, is_subclass

__all__ = ["MAX_HEADER_BYTES", "Entry", "decode", "encode", "payload_fingerprint",
           "read_header", "tensors_fingerprint", "unstorable"]

#: The safetensors dtype names NNx writes and reads, with their torch dtypes.
DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
    "I64": torch.int64, "I32": torch.int32, "I16": torch.int16, "I8": torch.int8,
    "U8": torch.uint8, "BOOL": torch.bool,
}
_NAMES = {dtype: name for name, dtype in DTYPES.items()}
#: A header larger than this is refused before it is parsed (the library's own cap).
MAX_HEADER_BYTES = 100 * 1024 * 1024
_FINGERPRINT = b"nnx.model_fingerprint/1\n"


@dataclass(frozen=True)
class Entry:
    """One tensor of a header: its dtype name, shape and byte extent in the data."""

    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


def unstorable(tensor: torch.Tensor) -> str | None:
    """Why ``tensor`` cannot be stored (its layout or dtype), or None when it can."""
    if type(tensor) not in (torch.Tensor, torch.nn.Parameter):
        # A tensor subclass (torchao's quantized weights) keeps its data in inner tensors
        # and metadata that one dtype-and-shape entry cannot describe.
        kind = type(tensor)
        return (f"is a {kind.__module__}.{kind.__qualname__} tensor subclass: only plain "
                f"dense tensors are stored")
    if tensor.layout is not torch.strided or tensor.is_quantized:
        return f"is {tensor.layout} / quantized: only dense tensors are stored"
    if tensor.dtype not in _NAMES:
        return (f"has dtype {tensor.dtype}, which the bundle format does not store "
                f"({', '.join(sorted(DTYPES))})")
    return None


def _raw(tensor: torch.Tensor, name: str) -> Any:
    """The tensor's little-endian bytes as a buffer: on a little-endian host a view of
    its (contiguous, CPU) storage, so the payload's one copy is :func:`encode`'s join."""
    problem = unstorable(tensor)
    if problem is not None:
        raise TypeError(f"tensor {name!r} {problem}")
    flat = tensor.detach().to("cpu").contiguous().reshape(-1)
    if flat.numel() == 0:
        return b""
    if sys.byteorder != "little" and flat.element_size() > 1:  # the format is little-endian
        return flat.numpy().byteswap().view("uint8")
    return flat.view(torch.uint8).numpy()


def encode(tensors: Mapping[str, torch.Tensor], metadata: Mapping[str, str] | None = None
           ) -> bytes:
    """The safetensors bytes of ``tensors`` (in name order), with optional string
    ``metadata``; the header is padded with spaces to a multiple of 8 bytes."""
    header: dict[str, Any] = {}
    chunks: list[Any] = []
    offset = 0
    for name in sorted(tensors):
        tensor = tensors[name]
        raw = _raw(tensor, name)
        header[name] = {"dtype": _NAMES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    # One join of the length, the header and the tensors' own buffers: each tensor's
    # bytes are copied once, into the payload, and never through an intermediate.
    return b"".join([len(text).to_bytes(8, "little"), text, *chunks])


def read_header(data: bytes, where: str) -> tuple[dict[str, Entry], dict[str, str], int]:
    """(entries, metadata, data start) of the safetensors bytes ``data``, every rule
    checked (ValueError naming ``where``); no tensor is built."""
    if len(data) < 8:
        raise ValueError(f"{where} is {len(data)} bytes, too short for a safetensors header")
    size = int.from_bytes(data[:8], "little")
    cap = MAX_HEADER_BYTES  # read at call time: one cap, which a test may lower
    if size > cap:
        raise ValueError(f"{where} declares a {size}-byte header, above the {cap}-byte cap "
                         "on a safetensors header; it is refused unread")
    if 8 + size > len(data):
        raise ValueError(f"{where} declares a {size}-byte header in a {len(data)}-byte file")
    # A view, not a slice: the header is decoded straight from the payload's buffer, so
    # a header near the cap costs its text and its values, never a third copy.
    header = load_json(data=memoryview(data)[8:8 + size], where=f"the header of {where}",
                       max_bytes=cap, strict=True)
    if not isinstance(header, dict):
        raise ValueError(f"the header of {where} is not a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise ValueError(f"the header of {where} has metadata that is not string to string")
    entries = {name: _entry(name, spec, where) for name, spec in header.items()}
    position = 0
    for name, entry in sorted(entries.items(), key=lambda item: (item[1].begin, item[1].end)):
        if entry.begin != position:
            raise ValueError(f"{where}: tensor {name!r} starts at byte {entry.begin}, not "
                             f"{position} (the extents must be contiguous, without overlap)")
        position = entry.end
    if 8 + size + position != len(data):
        raise ValueError(f"{where}: the tensors cover {position} bytes, the file holds "
                         f"{len(data) - 8 - size} after its header")
    return entries, metadata, 8 + size


def _entry(name: str, spec: Any, where: str) -> Entry:
    what = f"{where}: tensor {name!r}"
    if not isinstance(spec, dict) or set(spec) != {"dtype", "shape", "data_offsets"}:
        raise ValueError(f"{what} needs exactly dtype, shape and data_offsets")
    dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
    if dtype not in DTYPES:
        raise ValueError(f"{what} has unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(_count(d) for d in shape):
        raise ValueError(f"{what} has shape {shape!r}, not a list of non-negative integers")
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(map(_count, offsets))
            or offsets[0] > offsets[1]):
        raise ValueError(f"{what} has data_offsets {offsets!r}, not [begin, end]")
    expected = math.prod(shape) * DTYPES[dtype].itemsize
    if offsets[1] - offsets[0] != expected:
        raise ValueError(f"{what} holds {offsets[1] - offsets[0]} bytes; {dtype} of shape "
                         f"{shape} is {expected}")
    return Entry(dtype, tuple(shape), offsets[0], offsets[1])


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def decode(data: bytes, where: str, *, device: Any = "cpu",
           header: tuple[dict[str, Entry], dict[str, str], int] | None = None
           ) -> dict[str, torch.Tensor]:
    """The tensors of ``data`` (header checked first), each its own copy on ``device``.
    ``header``: what :func:`read_header` already returned for these very bytes (a
    validated bundle's), so the header is not parsed twice."""
    entries, _, start = read_header(data, where) if header is None else header
    view = memoryview(data)
    out: dict[str, torch.Tensor] = {}
    for name, entry in entries.items():
        dtype = DTYPES[entry.dtype]
        raw = bytearray(view[start + entry.begin:start + entry.end])  # the one copy
        if not raw:
            tensor = torch.empty(entry.shape, dtype=dtype)
        else:
            tensor = torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(entry.shape)
            if sys.byteorder != "little" and dtype.itemsize > 1:
                tensor = torch.from_numpy(tensor.numpy().byteswap())
        out[name] = tensor.to(device)
    return out


def _digest(items: list[tuple[str, str, tuple[int, ...], Any]]) -> str:
    digest = hashlib.sha256(_FINGERPRINT)
    for name, dtype, shape, raw in sorted(items, key=lambda item: item[0]):
        digest.update(canonical_bytes({"name": name, "dtype": dtype, "shape": list(shape),
                                       "bytes": len(raw)}))
        digest.update(b"\n")
        digest.update(raw)
    return f"sha256:{digest.hexdigest()}"


def payload_fingerprint(data: bytes, where: str) -> str:
    """The weights fingerprint of a safetensors payload: names, dtypes, shapes and raw
    bytes, read from the header and the data section only."""
    entries, _, start = read_header(data, where)
    view = memoryview(data)
    return _digest([(name, e.dtype, e.shape, view[start + e.begin:start + e.end])
                    for name, e in entries.items()])


def tensors_fingerprint(tensors: Mapping[str, torch.Tensor]) -> str:
    """:func:`payload_fingerprint` of ``encode(tensors)``, without encoding the file; a
    tensor subclass counts as the inner tensors a bundle stores for it."""
    if any(is_subclass(t) for t in tensors.values()):
        tensors = inner_tensors(tensors)
    return _digest([(name, _NAMES.get(t.dtype, str(t.dtype)), tuple(t.shape), _raw(t, name))
                    for name, t in tensors.items()])
