"""The Hub distribution layout (docs/hub.md): ``config.json`` + ``model.safetensors``.

``config.json`` is strict JSON: the format key (``{"nnx": {"format": "nnx.hub",
"version": 1}}``), the model params' state (net descriptor, loss, task spec, ...),
the built-in net's params state (``null`` for a registered factory), the
transform recipes and, for information only, the class that saved it.
``model.safetensors`` holds the network's tensors. The reader opens those two
files and nothing else, never through pickle: a pretrained directory or Hub repo
is data, and what it can make a process build is limited to what the process has
installed and registered (docs/hub.md "What a stranger's repo can make you build").

A repo id is resolved through ``huggingface_hub`` (the ``hub`` extra), one file at a
time, so a config this process cannot use is refused before the weights download.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from nnx._foundation.bounded import load_json
from nnx._foundation.extras import import_extra

__all__ = ["CONFIG_NAME", "FORMAT", "VERSION", "WEIGHTS_NAME", "HubConfig", "encode_config",
           "encode_weights", "fetch", "import_hub", "read_config", "read_weights",
           "weight_shapes"]

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
FORMAT = "nnx.hub"
VERSION = 1
_KEYS = {"nnx", "model_class", "model", "net", "transforms"}


@dataclass(frozen=True)
class HubConfig:
    """What a ``config.json`` records, checked for shape; nothing resolved or built."""

    model: Mapping[str, Any]
    net: Mapping[str, Any] | None
    transforms: tuple[Any, ...]
    model_class: str | None


def encode_config(*, model: Mapping[str, Any], net: Mapping[str, Any] | None,
                  transforms: tuple[Mapping[str, Any], ...], model_class: str) -> bytes:
    """The ``config.json`` bytes: sorted, indented, strict JSON (no NaN / Infinity)."""
    document = {"nnx": {"format": FORMAT, "version": VERSION}, "model_class": model_class,
                "model": dict(model), "net": None if net is None else dict(net),
                "transforms": [dict(t) for t in transforms]}
    return (json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n").encode()


def _no_constant(name: str) -> Any:
    raise ValueError(f"{CONFIG_NAME} holds {name}, which strict JSON does not allow")


def read_config(path: Path) -> HubConfig:
    """The checked content of ``path``; ValueError naming what is wrong.

    Bounded in size and depth (a planted document is refused before anything walks
    it); a config without NNx's format key (another library's ``config.json``), of a
    newer format version, or with keys this version does not know is refused.
    """
    where = f"{CONFIG_NAME} ({path})"
    doc = load_json(path, where=where, parse_constant=_no_constant)
    if not isinstance(doc, dict):
        raise ValueError(f"{where} is not a JSON object")
    tag = doc.get("nnx")
    if not isinstance(tag, dict) or tag.get("format") != FORMAT:
        raise ValueError(f"{where} is not an NNx Hub config (no {{'nnx': {{'format': "
                         f"{FORMAT!r}}}}} key); it was not written by NNModel.save_pretrained")
    version = tag.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ValueError(f"{where}: the format version must be a positive integer; got "
                         f"{version!r}")
    if version > VERSION:
        raise ValueError(f"{where} has format version {version}; this NNx reads version "
                         f"{VERSION}: upgrade nnx-core")
    unknown = sorted(set(doc) - _KEYS)
    if unknown or not {"model", "transforms"} <= set(doc):
        raise ValueError(f"{where} must hold 'model' and 'transforms' (optional 'net', "
                         f"'model_class'); unknown keys {unknown}")
    model, net, transforms = doc["model"], doc.get("net"), doc["transforms"]
    if not isinstance(model, dict) or not (net is None or isinstance(net, dict)):
        raise ValueError(f"{where}: 'model' must be an object and 'net' an object or null")
    if not isinstance(transforms, list):
        raise ValueError(f"{where}: 'transforms' must be a list")
    model_class = doc.get("model_class")
    return HubConfig(model=model, net=net, transforms=tuple(transforms),
                     model_class=model_class if isinstance(model_class, str) else None)


def encode_weights(state_dict: Mapping[str, torch.Tensor]) -> bytes:
    """``state_dict`` as safetensors bytes (CPU, contiguous).

    Safetensors stores each tensor once and refuses tensors that share storage (tied
    embeddings, views): such a tensor is written as its own copy, and loading copies
    the same values into each tied parameter.
    """
    from safetensors.torch import save

    tensors: dict[str, torch.Tensor] = {}
    seen: set[int] = set()
    for name, value in state_dict.items():
        tensor = value.detach().cpu().contiguous()
        storage = tensor.untyped_storage()
        whole = storage.nbytes() == tensor.numel() * tensor.element_size()
        if storage.data_ptr() in seen or not whole:
            tensor = tensor.clone()
        seen.add(tensor.untyped_storage().data_ptr())
        tensors[name] = tensor
    return save(tensors, metadata={"format": "pt"})


def weight_shapes(path: Path) -> dict[str, torch.Tensor]:
    """The tensors ``path`` holds as meta tensors (names and shapes, no data read), so a
    rebuilt net is compared with them before a byte of weights is loaded."""
    from safetensors import safe_open

    with safe_open(os.fspath(path), framework="pt", device="cpu") as handle:
        return {key: torch.empty(handle.get_slice(key).get_shape(), device="meta")
                for key in handle.keys()}  # noqa: SIM118 (a safe_open handle is no dict)


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor of ``path``, on the CPU."""
    from safetensors.torch import load_file

    return load_file(os.fspath(path), device="cpu")


def import_hub(owner: str) -> Any:
    """``huggingface_hub``, or ImportError naming ``pip install "nnx-core[hub]"``."""
    return import_extra(owner, "huggingface_hub", "hub", package="huggingface-hub")


def fetch(source: str | os.PathLike[str], filename: str, hub_kwargs: Mapping[str, Any]) -> Path:
    """``filename`` of ``source``: a local directory's file, else a Hub repo's.

    A local directory needs nothing beyond nnx-core; a repo id goes through
    ``huggingface_hub.hf_hub_download`` (``revision``, ``cache_dir``,
    ``local_files_only``, ``token``, ``force_download`` in ``hub_kwargs``), which
    honours ``HF_HUB_OFFLINE`` and an existing cache.
    """
    local = Path(os.fspath(source))
    if local.is_dir():
        path = local / filename
        if not path.is_file():
            raise FileNotFoundError(f"{local} holds no {filename}; it is not a directory "
                                    f"written by NNModel.save_pretrained")
        return path
    hub = import_hub("NNModel.from_pretrained with a Hub repo id")
    return Path(hub.hf_hub_download(repo_id=os.fspath(source), filename=filename,
                                    **dict(hub_kwargs)))
