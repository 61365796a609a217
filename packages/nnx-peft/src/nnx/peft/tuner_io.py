"""Adapter files for the LM tuners: save and load a tuner's own tensors, nothing else.

Selection is by ownership (spec §11.1): the allowlist is the destination tuner's
own parameters (``soft_prompt``; ``prefix_keys.i`` / ``prefix_values.i``), never a
substring match on names, so a full checkpoint handed to a loader cannot
overwrite a frozen base tensor and a base layer's tensors never reach a file.
"""

from __future__ import annotations

import io
import os
from collections.abc import Mapping
from pathlib import Path

import torch
from torch import nn

from nnx.extend import atomic_write_bytes

__all__ = ["load_owned", "save_owned"]

#: A path to an adapter file, or an already-loaded state dict.
Source = str | os.PathLike[str] | Mapping[str, object]


def save_owned(state: Mapping[str, torch.Tensor], path: str | os.PathLike[str]) -> Path:
    """Write ``state`` with ``torch.save``, atomically (temp beside ``path``, then rename),
    so a crash never leaves a torn adapter file; the path written is returned."""
    buffer = io.BytesIO()
    torch.save({name: t.detach() for name, t in state.items()}, buffer)
    return atomic_write_bytes(path, buffer.getvalue())


def load_owned(owner: str, tuner: nn.Module, owned: Mapping[str, torch.Tensor],
               source: Source) -> int:
    """Copy ``source``'s entries for the ``owned`` names into ``tuner``; their count.

    Every owned name must be present (a tuner's file is all of its trainable
    state, as Hugging Face's strict prompt-embedding load); other keys are
    ignored. Everything is checked before the first copy, so a refused load
    changes nothing; a wrong shape raises torch's own size-mismatch error. The
    copy converts into the destination's dtype and device (``load_state_dict``),
    and modes are left alone.
    """
    state = _read(owner, source)
    missing = [name for name in owned if name not in state]
    if missing:
        raise ValueError(f"{owner}: the source has no {', '.join(missing)}; it is not this "
                         f"tuner's adapter file (keys found: {sorted(state)[:6]})")
    picked: dict[str, torch.Tensor] = {}
    for name in owned:
        value = state[name]
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{owner}: {name} must be a tensor; got {type(value).__name__}")
        picked[name] = value
    wrong = {n: t for n, t in picked.items() if t.shape != owned[n].shape}
    if wrong:
        # Only the mismatched entries: torch raises its size-mismatch error, copying nothing.
        tuner.load_state_dict(wrong, strict=False)
    tuner.load_state_dict(picked, strict=False)
    return len(picked)


def _read(owner: str, source: Source) -> Mapping[str, object]:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, (str, os.PathLike)):
        loaded = torch.load(source, map_location="cpu", weights_only=True)
        if not isinstance(loaded, Mapping):
            raise ValueError(f"{owner}: {os.fspath(source)!r} holds a "
                             f"{type(loaded).__name__}, not a state dict")
        return loaded
    raise TypeError(f"{owner}: source must be a path or a state dict; "
                    f"got {type(source).__name__}")
