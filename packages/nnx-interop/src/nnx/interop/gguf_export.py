"""write_gguf: a TransformerNN (and its tokenizer) as one GGUF file (spec §15)."""

from __future__ import annotations

import os

from nnx.interop.document import write_document
from nnx.interop.inputs import check_arch, check_destination, export_source
from nnx.interop.layout import llama_tensors, nnx_tensors
from nnx.interop.metadata import model_metadata, tokenizer_metadata
from nnx.interop.report import GGUFExport

__all__ = ["write_gguf"]

_OWNER = "write_gguf"


def write_gguf(model: object, path: str | os.PathLike[str], *, arch: str = "nnx_transformer",
               tokenizer: object | None = None, name: str = "nnx-transformer",
               overwrite: bool = False) -> GGUFExport:
    """Write ``model`` (a TransformerNN, or a GenerativeNNModel holding one) to ``path``.

    ``arch="nnx_transformer"`` (the default) keeps NNx's tensor names with the fused QKV
    split into ``attn.q`` / ``attn.k`` / ``attn.v``: stock llama.cpp, Ollama and LM Studio
    do not run this architecture (docs/gguf.md). ``arch="llama"`` writes llama.cpp's Llama
    names and q/k layout instead. The tokenizer (``tokenizer=``, else the model's own) is
    embedded when there is one; every hyper-parameter is metadata. Tensors keep their dtype
    (float32, float16 or bfloat16), bit for bit.

    Refused before anything is written: a model that is not a TransformerNN
    (:class:`NotATransformerError`), an unknown ``arch``, another dtype, a tokenizer
    larger than the vocabulary or one llama.cpp would tokenize differently (anything but a
    GPT-2-style byte-level BPE; :class:`UnsupportedExportError`), an existing ``path``
    without ``overwrite=True`` or a directory (:class:`ExportExistsError`).
    """
    source = export_source(_OWNER, model, tokenizer)
    arch = check_arch(_OWNER, arch)
    dest = check_destination(_OWNER, path, overwrite=overwrite)
    if not isinstance(name, str) or not name:
        raise TypeError(f"{_OWNER}: name must be a non-empty str; got {name!r}")
    params = source.net.params
    tensors = llama_tensors(source.net) if arch == "llama" else nnx_tensors(source.net)
    entries = model_metadata(arch, params, name, tensors)
    if source.tokenizer is not None:
        entries += tokenizer_metadata(_OWNER, source.tokenizer, params.vocab_size)
    written = write_document(dest, arch, entries, tensors)
    return GGUFExport(path=written, arch=arch,
                      tensors={k: tuple(v.shape) for k, v in tensors.items()},
                      metadata_keys=("general.architecture", *(k for k, _, _ in entries)),
                      tokenizer_embedded=source.tokenizer is not None)
