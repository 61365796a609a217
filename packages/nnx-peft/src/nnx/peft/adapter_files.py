"""Adapter files (spec §11.1): save and load an adapter's own tensors, nothing else.

Every adapter-only helper (LoRA, IA3, the prompt and prefix tuners) selects by
registered ownership, never by a substring of a name: the allowlist is built
from the destination (:func:`owned_tensors`), so a plain layer called
``lora_A_projection`` never reaches a file and a full checkpoint handed to a
loader cannot overwrite a frozen base tensor. Files are ``torch.save``'d state
dicts written through nnx-core's one atomic writer.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

from nnx.extend import atomic_write_bytes

__all__ = ["Source", "load_owned", "owned_tensors", "save_owned"]

#: A path to an adapter file, or an already-loaded state dict.
Source = str | os.PathLike[str] | Mapping[str, object]

Owner = TypeVar("Owner", bound=nn.Module)


def owned_tensors(module: nn.Module, kind: type[Owner],
                  tensors_of: Callable[[Owner], Iterable[torch.Tensor]], *, what: str,
                  hint: str) -> dict[str, torch.Tensor]:
    """State-dict name → tensor for every tensor ``tensors_of`` names on each ``kind``
    submodule of ``module`` (under every alias name); ValueError, ending in ``hint``,
    when ``module`` holds no ``kind``."""
    owners = [m for m in module.modules() if isinstance(m, kind)]
    if not owners:
        raise ValueError(f"{what}: the module holds no {kind.__name__}; {hint}")
    owned = {id(t) for owner in owners for t in tensors_of(owner)}
    return {name: t for name, t in module.state_dict(keep_vars=True).items()
            if id(t) in owned}


def save_owned(state: Mapping[str, torch.Tensor], path: str | os.PathLike[str]) -> Path:
    """Write ``state`` (detached) with ``torch.save``, atomically, so a crash never leaves
    a torn adapter file; the path written is returned."""
    buffer = io.BytesIO()
    torch.save({name: t.detach() for name, t in state.items()}, buffer)
    return atomic_write_bytes(path, buffer.getvalue())


def load_owned(what: str, module: nn.Module, owned: Mapping[str, torch.Tensor],
               source: Source, *, complete: bool, describe: str) -> int:
    """Copy ``source``'s entries for the ``owned`` names into ``module``; their count.

    ``complete``: every owned name must be present (a tuner's file is all of its
    trainable state, like HF's strict prompt-embedding load); otherwise at least one
    (a LoRA or IA3 file may cover some layers: ``load_state_dict(strict=False)``).
    Other keys are ignored. Everything is checked before the first copy, so a
    refused load changes nothing; a wrong shape raises torch's own size-mismatch
    error. The copy converts into the destination's dtype and device, and modes are
    left alone.
    """
    state = _read(what, source)
    accepted = {name: state[name] for name in owned if name in state}
    missing = [name for name in owned if name not in state]
    if complete and missing:
        raise ValueError(f"{what}: the source has no {', '.join(missing)}; it is not this "
                         f"module's adapter file (keys found: {sorted(state)[:6]})")
    if not accepted:
        sample = ", ".join(repr(k) for k in list(owned)[:4])
        raise ValueError(f"{what}: none of the source's {len(state)} tensors is {describe} "
                         f"of this module; expected names like {sample}")
    for name, value in accepted.items():
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{what}: {name} must be a tensor; got {type(value).__name__}")
    tensors: dict[str, torch.Tensor] = accepted  # type: ignore[assignment]
    wrong = {n: t for n, t in tensors.items() if t.shape != owned[n].shape}
    if wrong:
        # Only the mismatched entries: torch raises its size-mismatch error, copying nothing.
        module.load_state_dict(wrong, strict=False)
    module.load_state_dict(tensors, strict=False)
    return len(tensors)


def _read(what: str, source: Source) -> Mapping[str, object]:
    if isinstance(source, Mapping):
        return source
    if isinstance(source, (str, os.PathLike)):
        loaded = torch.load(source, map_location="cpu", weights_only=True)
        if not isinstance(loaded, Mapping):
            raise ValueError(f"{what}: {os.fspath(source)!r} holds a "
                             f"{type(loaded).__name__}, not a state dict")
        return loaded
    raise TypeError(f"{what}: source must be a path or a state dict; "
                    f"got {type(source).__name__}")
