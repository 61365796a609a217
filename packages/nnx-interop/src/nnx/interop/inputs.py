"""Checking what users pass to the exports, before any file is read or written.

nnx-interop reaches nnx-lm (a dependency: every export takes its TransformerNN) only
through :func:`nnx_lm`, core's ``require_distribution``: add-on sources import only
``nnx`` and ``nnx.extend``, and a broken install still names ``pip install nnx-lm``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from nnx.extend import require_distribution
from nnx.interop.errors import ExportExistsError, NotATransformerError, UnsupportedExportError

__all__ = ["ARCHS", "DTYPES", "ExportSource", "check_arch", "check_destination", "export_source",
           "nnx_lm"]

#: The architectures write_gguf writes: NNx's own tensor names, or llama.cpp's Llama.
ARCHS = ("nnx_transformer", "llama")
#: The tensor dtypes a GGUF file stores bit for bit (GGML's F32, F16, BF16).
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def nnx_lm(needed_by: str) -> ModuleType:
    """``nnx.lm``, or core's MissingDistributionError naming ``pip install nnx-lm``."""
    return require_distribution("nnx-lm", "nnx.lm", needed_by=needed_by)


@dataclass(frozen=True)
class ExportSource:
    """The TransformerNN to export and its tokenizer (an NNTokenizerParams, or None)."""

    net: Any
    tokenizer: Any


def export_source(owner: str, model: object, tokenizer: object | None) -> ExportSource:
    """The net and tokenizer of ``model``: a TransformerNN, or a model (a
    GenerativeNNModel) whose ``net`` is one; ``tokenizer`` overrides the model's own."""
    lm = nnx_lm(owner)
    net = model if isinstance(model, lm.TransformerNN) else getattr(model, "net", None)
    if not isinstance(net, lm.TransformerNN):
        raise NotATransformerError(f"{owner} exports an nnx-lm TransformerNN (or a "
                                   f"GenerativeNNModel holding one); got {type(model).__name__}")
    tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tok is not None and not isinstance(tok, lm.NNTokenizerParams):
        raise TypeError(f"{owner}: tokenizer must be an NNTokenizerParams; got "
                        f"{type(tok).__name__}")
    if tok is not None and tok.vocab_size > net.params.vocab_size:
        raise UnsupportedExportError(
            f"{owner}: the tokenizer has {tok.vocab_size} tokens but the net's vocabulary "
            f"only {net.params.vocab_size}: its ids past the net could not be looked up")
    state = net.state_dict()
    with torch.device("meta"):  # the plain layout, without allocating or drawing the RNG
        plain = set(lm.TransformerNN(net.params).state_dict())
    if set(state) != plain:
        extra = sorted(set(state) ^ plain)
        raise UnsupportedExportError(
            f"{owner}: the net's tensors are not a plain TransformerNN's (differing: "
            f"{', '.join(extra[:3])}); merge or remove adapters and wrappers first")
    for name, tensor in state.items():
        if tensor.dtype not in DTYPES:
            raise UnsupportedExportError(
                f"{owner}: {name} is {tensor.dtype}; GGUF stores "
                f"{', '.join(str(d) for d in DTYPES)} bit for bit (cast the net first)")
    return ExportSource(net, tok)


def check_arch(owner: str, arch: object) -> str:
    if arch not in ARCHS:
        raise UnsupportedExportError(f"{owner}: arch must be one of {', '.join(ARCHS)}; "
                                     f"got {arch!r}")
    return str(arch)


def check_destination(owner: str, path: str | os.PathLike[str], *, overwrite: bool) -> Path:
    """``path`` as a Path: never a directory, and an existing file only with ``overwrite``."""
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(f"{owner}: path must be a non-empty path; got {path!r}")
    if not isinstance(overwrite, bool):
        raise TypeError(f"{owner}: overwrite must be a bool; got {overwrite!r}")
    dest = Path(os.fspath(path))
    if dest.is_dir():
        raise ExportExistsError(f"{owner}: {dest} is a directory; name the file to write")
    if (dest.exists() or dest.is_symlink()) and not overwrite:
        raise ExportExistsError(f"{owner}: {dest} exists; pass overwrite=True to replace it")
    return dest
