"""nnx-interop's named errors, each raised before anything is written."""

from __future__ import annotations

__all__ = ["ExportExistsError", "NotATransformerError", "UnsupportedExportError"]


class NotATransformerError(TypeError):
    """The model is not an nnx-lm TransformerNN (nor a model whose ``net`` is one)."""


class ExportExistsError(FileExistsError):
    """The destination exists and ``overwrite=True`` was not passed."""


class UnsupportedExportError(ValueError):
    """The net or its tokenizer holds something the requested format cannot carry
    (an unknown ``arch``, a tensor dtype GGUF has no type for, a tokenizer larger than
    the net's vocabulary)."""
