"""Adapter files (spec §11.1): save and load an adapter's own tensors, nothing else.

Every adapter-only helper (LoRA, IA3, the prompt and prefix tuners) selects by
registered ownership, never by a substring of a name: the allowlist is built
from the destination (:func:`owned_tensors`), so a plain layer called
``lora_A_projection`` never reaches a file and a full checkpoint handed to a
loader cannot overwrite a frozen base tensor. Files are ``torch.save``'d state
dicts written through nnx-core's one atomic writer.

Each file carries the SHA-256 of its tensors (:func:`tensors_digest`) as an
attribute of the saved ``OrderedDict`` (``nnx_adapter``), beside the state
dict's own ``_metadata``: the keys stay the tensor names alone, so
``torch.load(path)`` shows exactly what it did before. A load checks the
digest and refuses a file whose tensors changed with :class:`AdapterFileError`
naming the file; a file without it (written by an earlier release) loads
unchecked, as before.
"""

from __future__ import annotations

import io
import os
import re
import struct
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TypeVar

import torch
from torch import nn

from nnx.extend import atomic_write_bytes, cause_line, sha256_hex

__all__ = ["AdapterFileError", "Source", "load_owned", "owned_tensors", "save_owned",
           "tensors_digest"]

#: The attribute of a saved adapter state dict that carries its digest.
_DIGEST_ATTR = "nnx_adapter"
_DIGEST_FORMAT = "nnx.adapter/1"


class AdapterFileError(ValueError):
    """An adapter file that cannot be loaded: unreadable, or its tensors no longer match
    the SHA-256 it was saved with. ``path`` and ``reason`` are both in the message."""

    def __init__(self, what: str, path: str | os.PathLike[str], reason: str) -> None:
        self.path, self.reason = Path(path), reason
        super().__init__(f"{what}: adapter file {self.path.as_posix()}: {reason}")

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


def tensors_digest(state: Mapping[str, torch.Tensor]) -> str:
    """The SHA-256 of an adapter's tensors, independent of how the file was pickled.

    Over the tensors in sorted name order, each as: its UTF-8 name, its dtype's name
    (``float32``), its shape, each prefixed by its length (8-byte little-endian), then
    its raw element bytes as stored in memory in row-major order (little-endian on
    every platform torch ships for).
    """
    parts: list[bytes] = []
    for name in sorted(state):
        tensor = state[name].detach().to("cpu").contiguous()
        fields = (name, str(tensor.dtype).removeprefix("torch."),
                  ",".join(map(str, tensor.shape)))
        for text in fields:
            raw = text.encode("utf-8")
            parts += [struct.pack("<Q", len(raw)), raw]
        data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes()
        parts += [struct.pack("<Q", len(data)), data]
    return sha256_hex(b"".join(parts))


def save_owned(state: Mapping[str, torch.Tensor], path: str | os.PathLike[str]) -> Path:
    """Write ``state`` (detached) with ``torch.save``, atomically, so a crash never leaves
    a torn adapter file, with its :func:`tensors_digest`; the path written is returned."""
    saved: OrderedDict[str, torch.Tensor] = OrderedDict(
        (name, t.detach()) for name, t in state.items())
    setattr(saved, _DIGEST_ATTR, {"format": _DIGEST_FORMAT, "sha256": tensors_digest(saved)})
    buffer = io.BytesIO()
    torch.save(saved, buffer)
    return atomic_write_bytes(path, buffer.getvalue())


def load_owned(what: str, module: nn.Module, owned: Mapping[str, torch.Tensor],
               source: Source, *, complete: bool, describe: str,
               family: re.Pattern[str] | None = None) -> int:
    """Copy ``source``'s entries for the ``owned`` names into ``module``; their count.

    ``complete``: every owned name must be present (a tuner's file is all of its
    trainable state, like HF's strict prompt-embedding load); otherwise at least one
    (a LoRA or IA3 file may cover some layers: ``load_state_dict(strict=False)``).
    Other keys are ignored, except one that matches ``family`` (the names this kind of
    module gives its tensors) without being owned: the file was saved from a larger
    module (a deeper prefix tuner), and loading part of it would silently drop the
    rest, so it is refused. Everything is checked before the first copy, so a
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
    foreign = [] if family is None else sorted(
        k for k in state if isinstance(k, str) and family.fullmatch(k) and k not in owned)
    if foreign:
        raise ValueError(f"{what}: the source holds {', '.join(foreign[:6])}, which this "
                         f"module has no place for: it was saved from a larger module "
                         f"({len(owned)} tensors here, {len(owned) + len(foreign)} there)")
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
        try:
            loaded = torch.load(source, map_location="cpu", weights_only=True)
        except FileNotFoundError:
            raise
        except Exception as exc:  # torch's and pickle's messages name no file
            raise AdapterFileError(what, source, cause_line(exc)) from exc
        if not isinstance(loaded, Mapping):
            raise AdapterFileError(what, source, f"it holds a {type(loaded).__name__}, not a "
                                   "state dict")
        _check_digest(what, source, loaded)
        return loaded
    raise TypeError(f"{what}: source must be a path or a state dict; "
                    f"got {type(source).__name__}")


def _check_digest(what: str, path: str | os.PathLike[str], state: Mapping[str, object]) -> None:
    """Refuse a file whose tensors are not the ones it was saved with; one saved before
    adapter files carried a digest has none to check."""
    recorded = getattr(state, _DIGEST_ATTR, None)
    if recorded is None:
        return
    if not isinstance(recorded, Mapping) or recorded.get("format") != _DIGEST_FORMAT:
        raise AdapterFileError(what, path, f"its digest record is not {_DIGEST_FORMAT}")
    if not all(isinstance(t, torch.Tensor) for t in state.values()):
        raise AdapterFileError(what, path, "it holds values that are not tensors")
    tensors: Mapping[str, torch.Tensor] = state  # type: ignore[assignment]
    if tensors_digest(tensors) != recorded.get("sha256"):
        raise AdapterFileError(what, path, "its tensors do not match the SHA-256 they were "
                               "saved with (the file was altered or damaged)")
