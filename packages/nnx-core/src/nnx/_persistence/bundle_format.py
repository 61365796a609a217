"""Run bundle format v1 (spec §22): names, errors, the typed JSON encoding, safe reads.

::

    <bundle>/bundle.json              {"format", "version", "generation", "files"}
    <bundle>/g-<generation>/state.json, model.safetensors[, training.safetensors],
                            calibrator-<n>.json[, preprocessing.json]

state.json is strict JSON. Values JSON cannot hold are typed objects of exactly
one ``$`` key: ``{"$tuple": [...]}``, ``{"$intdict": [[key, value], ...]}`` (an
integer-keyed mapping such as an optimizer's state), ``{"$float": "inf" | "-inf"
| "nan"}`` and ``{"$tensor": "model:<name>" | "training:<name>"}`` (a tensor of
that safetensors payload). Anything else (a custom object, a non-tensor array)
is refused at export: a bundle never falls back to pickle.
"""

from __future__ import annotations

import math
import os
import re
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

__all__ = [
    "BUNDLE_FORMAT",
    "BUNDLE_VERSION",
    "MANIFEST",
    "STATE",
    "STATE_FORMAT",
    "BundleCapabilityError",
    "BundleExportError",
    "BundleReconstructionError",
    "BundleValidationError",
    "TensorRef",
    "decode_value",
    "encode_value",
    "generation_dir",
    "is_generation_name",
    "read_regular",
    "resolve_refs",
]

BUNDLE_FORMAT = "nnx.run_bundle"
BUNDLE_VERSION = 1
STATE_FORMAT = "nnx.run_bundle.state"
MANIFEST = "bundle.json"
STATE = "state.json"
MODEL = "model.safetensors"
TRAINING = "training.safetensors"
#: The fitted preprocessing's state (nnx.preprocessing/1), when one was exported.
PREPROCESSING = "preprocessing.json"
#: 32 lowercase hex digits: a generation id.
GENERATION = re.compile(r"[0-9a-f]{32}")
#: The atomic writer's temp beside bundle.json, which a killed export may strand.
MANIFEST_TEMP = re.compile(r"\.bundle\.json\.[0-9a-f]{8}")
CALIBRATOR = re.compile(r"calibrator-(0|[1-9][0-9]{0,5})\.json")
#: The payloads a generation may hold; their names are the format's, never a caller's.
PAYLOAD_NAMES = (STATE, MODEL, TRAINING, PREPROCESSING)
#: A manifest or state document larger than these is refused before it is read.
MAX_MANIFEST_BYTES = 1024 * 1024
MAX_JSON_BYTES = 64 * 1024 * 1024
#: The typed encodings' keys.
TYPED = ("$tuple", "$intdict", "$float", "$tensor")


class BundleValidationError(ValueError):
    """A bundle that fails a §22 check: named file, what is wrong. Nothing was built."""


class BundleExportError(ValueError):
    """export_bundle refused the checkpoint before anything was written."""


class BundleCapabilityError(ValueError):
    """The bundle cannot do what was asked (resume an inference bundle, ...)."""


class BundleReconstructionError(LookupError):
    """What reconstruction needs and this process lacks, every item named at once."""


def generation_dir(generation: str) -> str:
    return f"g-{generation}"


def is_generation_name(name: str) -> bool:
    return name.startswith("g-") and GENERATION.fullmatch(name[2:]) is not None


# -- typed encoding ------------------------------------------------------------------
def encode_value(value: Any, path: str, tensor: Callable[[str, torch.Tensor], str]) -> Any:
    """``value`` as strict-JSON data; ``tensor(path, t)`` stores a tensor and returns its
    reference. BundleExportError naming ``path`` for anything that is not plain data."""
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$float": repr(value)}
    if isinstance(value, torch.Tensor):
        return {"$tensor": tensor(path, value)}
    if isinstance(value, tuple):
        return {"$tuple": [encode_value(v, f"{path}[{i}]", tensor) for i, v in enumerate(value)]}
    if isinstance(value, list):
        return [encode_value(v, f"{path}[{i}]", tensor) for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        keys = list(value)
        if keys and all(isinstance(k, int) and not isinstance(k, bool) for k in keys):
            return {"$intdict": [[k, encode_value(value[k], f"{path}[{k}]", tensor)]
                                 for k in keys]}
        if not all(isinstance(k, str) for k in keys):
            raise BundleExportError(f"{path}: a mapping with keys {keys[:5]!r} is neither "
                                    "string- nor integer-keyed; a bundle stores plain data only")
        if len(keys) == 1 and keys[0].startswith("$"):
            raise BundleExportError(f"{path}: the key {keys[0]!r} alone would read as a typed "
                                    "value; rename it")
        return {k: encode_value(v, f"{path}.{k}", tensor) for k, v in value.items()}
    raise BundleExportError(f"{path}: a {type(value).__module__}.{type(value).__qualname__} "
                            "is not plain data (tensors, numbers, strings, booleans, None and "
                            "containers of those); a bundle never pickles")


def decode_value(value: Any, path: str, tensor: Callable[[str, str], Any]) -> Any:
    """The value :func:`encode_value` encoded; ``tensor(path, ref)`` resolves a reference
    (or records it). BundleValidationError naming ``path`` for a malformed typed value."""
    if isinstance(value, list):
        return [decode_value(v, f"{path}[{i}]", tensor) for i, v in enumerate(value)]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, inner), = value.items()
        if key.startswith("$"):
            return _typed(key, inner, path, tensor)
    return {k: decode_value(v, f"{path}.{k}", tensor) for k, v in value.items()}


def _typed(key: str, inner: Any, path: str, tensor: Callable[[str, str], Any]) -> Any:
    if key == "$tuple" and isinstance(inner, list):
        return tuple(decode_value(v, f"{path}[{i}]", tensor) for i, v in enumerate(inner))
    if key == "$intdict" and isinstance(inner, list):
        out: dict[int, Any] = {}
        for item in inner:
            if (not isinstance(item, list) or len(item) != 2 or not isinstance(item[0], int)
                    or isinstance(item[0], bool) or item[0] in out):
                raise BundleValidationError(f"state.json {path}: a $intdict entry must be a "
                                            f"[unique integer, value] pair; got {item!r}")
            out[item[0]] = decode_value(item[1], f"{path}[{item[0]}]", tensor)
        return out
    if key == "$float" and inner in ("inf", "-inf", "nan"):
        return float(inner)
    if key == "$tensor" and isinstance(inner, str):
        return tensor(path, inner)
    raise BundleValidationError(f"state.json {path}: {{{key!r}: {inner!r}}} is not a typed "
                                f"value of the format ({', '.join(TYPED)})")


@dataclass(frozen=True)
class TensorRef:
    """A validated ``$tensor`` reference: the payload (``model`` / ``training``) and name."""

    payload: str
    name: str


def resolve_refs(value: Any, tensors: Mapping[str, Any]) -> Any:
    """``value`` with every :class:`TensorRef` replaced by ``tensors[ref.name]`` (tuples,
    lists and integer-keyed mappings kept as they are)."""
    if isinstance(value, TensorRef):
        return tensors[value.name]
    if isinstance(value, tuple):
        return tuple(resolve_refs(v, tensors) for v in value)
    if isinstance(value, list):
        return [resolve_refs(v, tensors) for v in value]
    if isinstance(value, dict):
        return {k: resolve_refs(v, tensors) for k, v in value.items()}
    return value


# -- safe reads ------------------------------------------------------------------------
def read_regular(path: Path, size: int | None, max_bytes: int, what: str, *,
                 dir_fd: int | None = None) -> bytes:
    """The bytes of ``path``, a regular file opened without following a symbolic link
    (nor blocking on a FIFO); ``size`` (when known) is checked on the open file before
    a byte is read, ``max_bytes`` bounds the read either way. ``dir_fd``: an open
    directory ``path`` (then a bare name) is relative to, so no path component between
    it and the file can be swapped for a symbolic link."""
    try:
        info = os.stat(path, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        raise BundleValidationError(f"{what} is missing ({path.name})") from None
    if stat.S_ISLNK(info.st_mode):
        raise BundleValidationError(f"{what} is a symbolic link ({path.name}); a bundle is "
                                    "read only from its own regular files")
    if not stat.S_ISREG(info.st_mode):
        raise BundleValidationError(f"{what} is not a regular file ({path.name})")
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise BundleValidationError(f"{what} cannot be opened safely ({path.name}: "
                                    f"{exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(handle.fileno())
        if not stat.S_ISREG(opened.st_mode):
            raise BundleValidationError(f"{what} is not a regular file ({path.name})")
        limit = max_bytes if size is None else size
        if opened.st_size > max_bytes or (size is not None and opened.st_size != size):
            raise BundleValidationError(f"{what} ({path.name}) is {opened.st_size} bytes; "
                                        f"expected {size if size is not None else '≤'}"
                                        f"{'' if size is not None else max_bytes}")
        data = handle.read(limit + 1)
    if len(data) != (limit if size is not None else len(data)) or len(data) > limit:
        raise BundleValidationError(f"{what} ({path.name}) changed size while it was read")
    return data
