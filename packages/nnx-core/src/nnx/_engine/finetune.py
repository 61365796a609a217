"""Fine-tuning helpers (spec §7): freeze by glob, load foreign weights, export.

Every helper here checks all of its input before it changes anything, so a
refusal (a pattern that matches nothing, a shape mismatch under ``strict``)
leaves the module exactly as it was.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nnx._foundation.atomic import atomic_write, atomic_write_bytes
from nnx._persistence.checkpoint_format import encode_checkpoint, is_safetensors
from nnx._persistence.read_errors import CheckpointReadError, cause_line

__all__ = ["LoadResult", "export_state_dict", "freeze", "frozen", "load_pretrained", "unfreeze"]

_SHOWN = 5  # how many names an error lists before eliding the rest

PathLike = str | os.PathLike[str]


def freeze(module: nn.Module, *patterns: str) -> list[str]:
    """Set ``requires_grad=False`` on parameters whose dotted name matches a glob.

    Returns the names whose flag changed (already-frozen matches are not
    listed). A pattern that matches no parameter raises ``ValueError`` before
    anything changes: unlike non-strict param groups, freezing is an explicit
    request, and a typo silently training the "frozen" block is the worse bug.
    """
    return _set_requires_grad(module, patterns, False, "freeze")


def unfreeze(module: nn.Module, *patterns: str) -> list[str]:
    """Set ``requires_grad=True`` on matching parameters; ``unfreeze(m, "*")`` undoes freeze.

    Same matching and refusal rules as :func:`freeze`. Integer parameters
    cannot require gradients and are skipped.
    """
    return _set_requires_grad(module, patterns, True, "unfreeze")


def frozen(module: nn.Module) -> list[str]:
    """The dotted names of parameters that do not require gradients, in module order."""
    return [name for name, p in module.named_parameters() if not p.requires_grad]


def _set_requires_grad(
    module: nn.Module, patterns: tuple[str, ...], flag: bool, api: str
) -> list[str]:
    if not patterns:
        raise ValueError(f"{api}: give at least one glob pattern ('*' matches every parameter)")
    for i, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(
                f"{api}: pattern[{i}] must be a non-empty glob string; got {pattern!r}"
            )
    # Tied parameters have several names; match every alias, report the canonical one.
    canonical = {id(p): name for name, p in module.named_parameters()}
    aliases = list(module.named_parameters(remove_duplicate=False))
    unmatched = [pat for pat in patterns if not any(fnmatchcase(n, pat) for n, _ in aliases)]
    if unmatched:
        raise ValueError(
            f"{api}: pattern(s) {', '.join(map(repr, unmatched))} match no parameter; "
            f"names look like {_sample(canonical.values())}"
        )
    changed: list[str] = []
    seen: set[int] = set()
    for name, param in aliases:
        if id(param) in seen or not any(fnmatchcase(name, pat) for pat in patterns):
            continue
        seen.add(id(param))
        if param.requires_grad == flag:
            continue
        if flag and not (param.is_floating_point() or param.is_complex()):
            continue  # autograd refuses integer leaves; nothing to unfreeze
        param.requires_grad_(flag)
        changed.append(canonical[id(param)])
    return changed


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What :func:`load_pretrained` did.

    ``loaded_keys``, ``missing_keys`` and ``mismatched_keys`` use the module's
    own names; ``unexpected_keys`` are the source's original names (before
    ``key_map``), so they can be looked up in the checkpoint.
    """

    loaded_keys: tuple[str, ...]
    missing_keys: tuple[str, ...]
    unexpected_keys: tuple[str, ...]
    mismatched_keys: tuple[str, ...]


def load_pretrained(
    module: nn.Module,
    source: Mapping[str, torch.Tensor] | PathLike | nn.Module,
    *,
    strict: bool = True,
    key_map: Mapping[str, str] | None = None,
    map_location: str | torch.device = "cpu",
) -> LoadResult:
    """Copy weights from a state dict, a ``.pt`` / ``.safetensors`` file or another module.

    ``key_map`` rewrites source key prefixes before matching (the longest
    matching prefix wins), e.g. ``{"backbone.": "layers."}``. A tensor whose
    shape differs from the module's is never loaded. ``strict=True`` raises
    ``ValueError`` listing every missing, unexpected and mismatched key before
    any tensor is copied; ``strict=False`` loads what matches and reports the
    rest. Files are read with ``torch.load(weights_only=True)``, or the safetensors
    reader for a ``.safetensors`` path; dtypes are cast to the module's on copy.
    ``requires_grad`` flags are left as they are.
    """
    incoming = _source_state(source, map_location)
    renamed = _apply_key_map(incoming, key_map)  # module key -> source key
    target = module.state_dict()

    loaded: list[str] = []
    mismatched: list[str] = []
    unexpected: list[str] = []
    problems: list[str] = []
    for key, src in renamed.items():
        if key not in target:
            unexpected.append(src)
            problems.append(f"unexpected {src}{_renamed(key, src, 'mapped to')}")
            continue
        want, got = target[key], incoming[src]
        if isinstance(want, torch.Tensor) and want.shape != got.shape:
            mismatched.append(key)
            problems.append(
                f"shape mismatch {key}{_renamed(src, key, 'source')}: "
                f"source {tuple(got.shape)}, module {tuple(want.shape)}"
            )
        else:
            loaded.append(key)
    missing = [k for k in target if k not in renamed]
    problems += [f"missing {k}" for k in missing]

    if strict and problems:
        raise ValueError(
            f"load_pretrained (strict): {len(problems)} problem(s), nothing was loaded:\n  "
            + "\n  ".join(problems)
        )
    if loaded:
        partial: OrderedDict[str, Any] = OrderedDict((k, incoming[renamed[k]]) for k in loaded)
        # load_state_dict reads per-module versions from _metadata; pass the
        # module's own so version-aware loaders (BatchNorm) see current keys.
        metadata = getattr(target, "_metadata", None)
        if metadata is not None:
            setattr(partial, "_metadata", metadata)  # noqa: B010 (not a declared attribute)
        module.load_state_dict(partial, strict=False)
    else:
        warnings.warn(
            "load_pretrained loaded no tensors; check key_map against "
            f"{_sample(target)} (module) and {_sample(incoming)} (source)",
            RuntimeWarning,
            stacklevel=2,
        )
    return LoadResult(tuple(loaded), tuple(missing), tuple(unexpected), tuple(mismatched))


def _source_state(
    source: Mapping[str, torch.Tensor] | PathLike | nn.Module, map_location: str | torch.device
) -> dict[str, torch.Tensor]:
    obj: Any
    if isinstance(source, nn.Module):
        obj = source.state_dict()
    elif isinstance(source, (str, os.PathLike)):
        obj = _read_file(Path(source), map_location)
        if not isinstance(obj, Mapping):
            raise CheckpointReadError(Path(source), f"it holds a {type(obj).__name__}, not a "
                                      "state dict of named tensors")
    else:
        obj = source
    if not isinstance(obj, Mapping):
        raise ValueError(
            f"load_pretrained: source must be a state dict, a .pt path or an nn.Module; "
            f"got {type(obj).__name__}"
        )
    bad = [repr(k) for k, v in obj.items() if not (isinstance(k, str) and torch.is_tensor(v))]
    if bad:
        raise ValueError(
            "load_pretrained: a state dict maps names to tensors; these entries do not: "
            f"{_sample(bad)} (for a checkpoint wrapper, pass its nested state dict)"
        )
    return dict(obj)


def _read_file(path: Path, map_location: str | torch.device) -> Any:
    """A weights file's contents. A missing file or package raises as such; anything else
    (a header declaring a shape whose size overflows, a torn or foreign file) is
    :class:`CheckpointReadError` naming the file, never torch's raw message."""
    try:
        if is_safetensors(path):
            from safetensors.torch import load_file

            return load_file(os.fspath(path), device=str(map_location))
        # weights_only: a downloaded checkpoint must not be able to run code.
        return torch.load(os.fspath(path), map_location=map_location, weights_only=True)
    except (FileNotFoundError, ImportError):
        raise
    except Exception as exc:
        raise CheckpointReadError(path, cause_line(exc)) from exc


def _apply_key_map(
    incoming: Mapping[str, torch.Tensor], key_map: Mapping[str, str] | None
) -> dict[str, str]:
    prefixes = dict(key_map or {})
    for old, new in prefixes.items():
        if not isinstance(old, str) or not isinstance(new, str):
            raise ValueError(f"load_pretrained: key_map maps str to str; got {old!r}: {new!r}")
    # Longest first, so {"a.": ..., "a.b.": ...} rewrites "a.b.w" by the more specific rule.
    ordered = sorted(prefixes, key=len, reverse=True)
    renamed: dict[str, str] = {}
    for src in incoming:
        match = next((p for p in ordered if src.startswith(p)), None)
        key = src if match is None else prefixes[match] + src[len(match) :]
        if key in renamed:
            raise ValueError(
                f"load_pretrained: key_map sends both {renamed[key]!r} and {src!r} to {key!r}"
            )
        renamed[key] = src
    return renamed


def export_state_dict(module: nn.Module, path: PathLike) -> Path:
    """Save ``module.state_dict()`` alone (no NNCheckpoint wrapper), atomically.

    The format follows the extension, as checkpoints do: a ``.safetensors``
    path gets a safetensors file (any safetensors reader opens it), every
    other path a plain ``torch.save`` pickle. The file is written next to
    ``path`` and renamed over it, so a reader never sees half a file.
    Returns the resolved destination.
    """
    state = module.state_dict()
    if is_safetensors(path):
        # The checkpoint encoder's safetensors branch: the weights as tensors.
        data = encode_checkpoint(Path(path), {"state_dict": state})
        return atomic_write_bytes(path, data)
    return atomic_write(path, lambda handle: torch.save(state, handle))


def _renamed(other: str, name: str, how: str) -> str:
    """Mention the other spelling of a key when key_map changed it."""
    return "" if other == name else f" ({how} {other!r})"


def _sample(names: Any) -> str:
    listed = [str(n) for n in names]
    shown = ", ".join(listed[:_SHOWN])
    more = f", ... ({len(listed) - _SHOWN} more)" if len(listed) > _SHOWN else ""
    return f"[{shown}{more}]" if listed else "[] (none)"
