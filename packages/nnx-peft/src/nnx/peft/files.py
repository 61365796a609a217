"""LoRA adapter files (spec §11.1): the lora_A / lora_B tensors only, chosen by ownership.

The allowlist is built from the module: the state-dict names whose tensor is
the ``lora_A.weight`` or ``lora_B.weight`` of a :class:`LoRALinear` the module
holds. Nothing is selected by a substring of the name, so a plain layer
called ``lora_A_projection`` never leaks into a file, and a full checkpoint
handed to the loader cannot overwrite a frozen ``base`` tensor.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nnx.extend import atomic_write
from nnx.peft.lora import LoRALinear

__all__ = ["load_lora_weights", "lora_state_dict", "save_lora_weights"]


def _owned(module: nn.Module, what: str) -> dict[str, torch.Tensor]:
    """State-dict name → tensor for every LoRA matrix the module owns (every alias name)."""
    wrappers = [m for m in module.modules() if isinstance(m, LoRALinear)]
    if not wrappers:
        raise ValueError(f"{what}: the module holds no LoRALinear; wrap it with apply_lora_to "
                         f"(or replay the LoRA recipe) first")
    owned = {id(t) for w in wrappers for t in (w.lora_A.weight, w.lora_B.weight)}
    return {name: t for name, t in module.state_dict(keep_vars=True).items()
            if id(t) in owned}


def lora_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """The detached lora_A / lora_B tensors of every LoRALinear in ``module``, by
    state-dict name (what :func:`save_lora_weights` writes)."""
    return {k: v.detach() for k, v in _owned(module, "lora_state_dict").items()}


def save_lora_weights(module: nn.Module, path: str | os.PathLike[str]) -> Path:
    """Write :func:`lora_state_dict` to ``path`` (``torch.save`` format), atomically.

    The file appears complete or not at all (nnx.extend's one atomic writer);
    ValueError before any file is touched if ``module`` holds no LoRALinear.
    """
    state = lora_state_dict(module)
    return atomic_write(path, lambda f: torch.save(state, f))


def _source(source: Any) -> Mapping[str, torch.Tensor]:
    if isinstance(source, (str, os.PathLike)):
        source = torch.load(source, map_location="cpu", weights_only=True)
    if not isinstance(source, Mapping) or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in source.items()):
        raise ValueError("load_lora_weights: the source must be a path to a torch.save'd "
                         "state dict or a mapping of names to tensors")
    return source


def load_lora_weights(module: nn.Module,
                      source: str | os.PathLike[str] | Mapping[str, torch.Tensor]) -> int:
    """Load the LoRA tensors of ``source`` into the already-wrapped ``module``; the count
    of accepted tensors.

    Only names the destination's LoRALinear layers own are read; everything
    else in ``source`` (a full checkpoint's ``base`` tensors too) is ignored.
    Values are copied into the existing tensors, so they keep the
    destination's dtype and device, and no module's mode changes. A
    wrong-shaped owned tensor raises torch's own size-mismatch error before
    any tensor is copied. ValueError if no tensor of ``source`` is accepted.
    """
    allowed = _owned(module, "load_lora_weights")
    state = _source(source)
    accepted = {k: v for k, v in state.items() if k in allowed}
    if not accepted:
        sample = ", ".join(repr(k) for k in list(allowed)[:4])
        raise ValueError(f"load_lora_weights: none of the source's {len(state)} tensors is a "
                         f"lora_A / lora_B of this module; expected names like {sample}")
    mismatched = {k: v for k, v in accepted.items() if v.shape != allowed[k].shape}
    if mismatched:  # torch's own error, raised before anything else is copied
        module.load_state_dict(mismatched, strict=False)
    module.load_state_dict(accepted, strict=False)
    return len(accepted)
