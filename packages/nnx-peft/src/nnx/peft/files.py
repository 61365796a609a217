"""LoRA adapter files (spec §11.1): the lora_A / lora_B tensors only, chosen by ownership.

The allowlist is built from the module: the state-dict names whose tensor is
the ``lora_A.weight`` or ``lora_B.weight`` of a :class:`LoRALinear` the module
holds. Nothing is selected by a substring of the name, so a plain layer
called ``lora_A_projection`` never leaks into a file, and a full checkpoint
handed to the loader cannot overwrite a frozen ``base`` tensor.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from nnx.peft.adapter_files import Source, load_owned, owned_tensors, save_owned
from nnx.peft.lora import LoRALinear

__all__ = ["load_lora_weights", "lora_state_dict", "save_lora_weights"]


def _owned(module: nn.Module, what: str) -> dict[str, torch.Tensor]:
    """State-dict name → tensor for every LoRA matrix the module owns (every alias name)."""
    return owned_tensors(
        module, LoRALinear,
        lambda w: (w.lora_A.weight, w.lora_B.weight),
        what=what, hint="wrap it with apply_lora_to (or replay the LoRA recipe) first")


def lora_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """The detached lora_A / lora_B tensors of every LoRALinear in ``module``, by
    state-dict name (what :func:`save_lora_weights` writes)."""
    return {k: v.detach() for k, v in _owned(module, "lora_state_dict").items()}


def save_lora_weights(module: nn.Module, path: str | os.PathLike[str]) -> Path:
    """Write :func:`lora_state_dict` to ``path`` (``torch.save`` format), atomically.

    The file appears complete or not at all (nnx.extend's one atomic writer);
    ValueError before any file is touched if ``module`` holds no LoRALinear.
    """
    return save_owned(_owned(module, "save_lora_weights"), path)


def load_lora_weights(module: nn.Module, source: Source) -> int:
    """Load the LoRA tensors of ``source`` into the already-wrapped ``module``; the count
    of accepted tensors.

    Only names the destination's LoRALinear layers own are read; everything
    else in ``source`` (a full checkpoint's ``base`` tensors too) is ignored, and a
    source may cover only some layers (``load_state_dict(strict=False)``). Values
    are copied into the existing tensors, so they keep the destination's dtype and
    device, and no module's mode changes. A wrong-shaped owned tensor raises
    torch's own size-mismatch error before any tensor is copied. ValueError if no
    tensor of ``source`` is accepted.
    """
    return load_owned("load_lora_weights", module, _owned(module, "load_lora_weights"),
                      source, complete=False, describe="a lora_A / lora_B")
