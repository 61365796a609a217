"""How a checkpoint payload becomes bytes: torch pickle, or safetensors by file suffix.

A ``.safetensors`` checkpoint stores the weights as safetensors tensors and
everything else (configuration, record, generation, …) as JSON in the header
metadata under ``"nnx"``. Reading one accepts a device string or
``torch.device`` as ``map_location``; the callable and mapping forms of
``torch.load`` are refused, because safetensors exposes device placement, not
storage remapping. Pickle checkpoints forward any ``torch.load`` map_location.
The header's JSON goes through the bounded reader: a planted header nested
thousands of levels deep is a ValueError naming the file, not a RecursionError.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from nnx._foundation.bounded import load_json

__all__ = ["check_map_location", "decode_checkpoint", "encode_checkpoint", "is_safetensors",
           "read_record"]


def is_safetensors(path: str | os.PathLike[str]) -> bool:
    return Path(path).suffix == ".safetensors"


def encode_checkpoint(path: Path, payload: Mapping[str, Any]) -> bytes:
    if not is_safetensors(path):
        buffer = io.BytesIO()
        torch.save(dict(payload), buffer)
        return buffer.getvalue()
    from safetensors.torch import save

    meta = {k: v for k, v in payload.items() if k != "state_dict"}
    tensors = {k: v.detach().contiguous().cpu() for k, v in payload["state_dict"].items()}
    return save(tensors, metadata={"nnx": json.dumps(meta, allow_nan=True)})


def check_map_location(path: Path, map_location: Any) -> None:
    """Refuse (TypeError) a map_location ``path``'s format cannot honour, before reading."""
    if is_safetensors(path):
        _device(map_location)


def _device(map_location: Any) -> str:
    if map_location is None:
        return "cpu"
    if isinstance(map_location, (str, torch.device)):
        return str(map_location)
    raise TypeError("a safetensors checkpoint takes a device string or torch.device as "
                    f"map_location, not a {type(map_location).__name__} (callable and mapping "
                    "forms exist only for pickle checkpoints)")


def decode_checkpoint(path: Path, map_location: Any, data: bytes | None = None) -> Any:
    """The payload of ``path`` (its suffix says the format). ``data``: its bytes, read
    once by a caller that checked their digest, decoded as they are; without it the
    file is read directly (a safetensors file memory-mapped, not copied)."""
    if not is_safetensors(path):
        source: Any = os.fspath(path) if data is None else io.BytesIO(data)
        return torch.load(source, map_location=map_location, weights_only=True)
    device = _device(map_location)
    if data is None:
        from safetensors import safe_open

        with safe_open(os.fspath(path), framework="pt", device=device) as handle:
            meta: Mapping[str, str] = handle.metadata() or {}
            state = {key: handle.get_tensor(key) for key in handle.keys()}  # noqa: SIM118
    else:
        from safetensors.torch import load

        state = load(data)  # validates the header and every tensor's extent
        meta = _safetensors_metadata(data)
        if device != "cpu":
            state = {key: tensor.to(device) for key, tensor in state.items()}
    if "nnx" not in meta:
        raise ValueError("a safetensors file without NNx checkpoint metadata")
    payload = _header(path, meta["nnx"])
    payload["state_dict"] = state
    return payload


def _header(path: Path, text: str) -> Any:
    value = load_json(data=text, where=f"the NNx header of {path.name}")
    if not isinstance(value, dict):
        raise ValueError(f"the NNx header of {path.name} is not a mapping")
    return value


def _safetensors_metadata(data: bytes) -> Mapping[str, str]:
    """The ``__metadata__`` of a safetensors header: an 8-byte little-endian length, then
    that many bytes of JSON (the format's definition; ``load`` has already checked it)."""
    size = int.from_bytes(data[:8], "little")
    header = load_json(data=data[8:8 + size], where="a safetensors header")
    meta = header.get("__metadata__") if isinstance(header, dict) else None
    return meta if isinstance(meta, dict) else {}


def read_record(path: Path) -> Mapping[str, Any]:
    """A checkpoint's payload without unpickling anything it could hide: a safetensors
    file's header metadata alone (no tensor is read), a pickle checkpoint through
    ``torch.load(weights_only=True, mmap=True)`` (tensors mapped, not read). Verification
    uses it to compare the point's identity with what its manifest says."""
    if is_safetensors(path):
        from safetensors import safe_open

        with safe_open(os.fspath(path), framework="pt", device="cpu") as handle:
            meta = handle.metadata() or {}
        record = _header(path, meta["nnx"]) if "nnx" in meta else None
    else:
        record = torch.load(os.fspath(path), map_location="cpu", weights_only=True, mmap=True)
    if not isinstance(record, dict):
        raise ValueError(f"{path.name} holds no NNx checkpoint payload")
    return record
