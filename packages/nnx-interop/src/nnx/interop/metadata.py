"""The GGUF key/value metadata of an export: hyper-parameters and the tokenizer.

Both architectures carry llama.cpp's standard ``<arch>.*`` keys (context length, widths,
heads, RMSNorm epsilon, RoPE base and dimensions) and every TransformerNN hyper-parameter
under ``nnx.params.<field>`` at full precision (GGUF's standard epsilon and RoPE base are
float32), so the NNTransformerParams can be rebuilt exactly. The tokenizer, when there is
one, goes in twice: its whole ``tokenizers`` JSON (``tokenizer.huggingface.json``) and
llama.cpp's ``tokenizer.ggml.*`` vocabulary (tokens, their types, BPE merges, special
ids, and ``tokenizer.ggml.pre``, see nnx.interop.vocab), padded with unused placeholder
tokens up to the net's vocabulary size.
``general.file_type`` names the tensors' precision in llama.cpp's numbering.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from typing import Any

import gguf
import torch

from nnx.interop.vocab import ggml_tokenizer

__all__ = ["HYPER_PARAMETERS", "Entry", "file_type", "model_metadata", "tokenizer_metadata"]

#: (key, value, type); a list value is an array of the type.
Entry = tuple[str, Any, gguf.GGUFValueType]

_V = gguf.GGUFValueType
#: The NNTransformerParams fields a TransformerNN is built from, and their GGUF types.
HYPER_PARAMETERS = {
    "vocab_size": _V.UINT32, "d_model": _V.UINT32, "n_heads": _V.UINT32,
    "n_layers": _V.UINT32, "max_seq_len": _V.UINT32, "ffn_mult": _V.UINT32,
    "ffn_dim": _V.UINT32, "rope_base": _V.FLOAT64, "norm_eps": _V.FLOAT64,
    "tie_embeddings": _V.BOOL, "attn_dropout": _V.FLOAT64, "resid_dropout": _V.FLOAT64,
}


_F = gguf.LlamaFileType
#: The file type a file of mostly this dtype's matrices declares (llama.cpp has no
#: "mostly F32": a file whose matrices are float32 is ALL_F32, as its loader guesses).
_FILE_TYPES = {torch.float32: _F.ALL_F32, torch.float16: _F.MOSTLY_F16,
               torch.bfloat16: _F.MOSTLY_BF16}


def file_type(tensors: Mapping[str, torch.Tensor]) -> gguf.LlamaFileType:
    """``general.file_type`` for ``tensors``: ALL_F32 when every tensor is float32,
    else the dtype of the matrices (MOSTLY_F16 / MOSTLY_BF16, whatever the 1-D norm
    weights hold, as llama.cpp's "except 1d tensors" says); matrices of mixed dtypes
    declare the dtype most of them have, the guess llama.cpp makes without the key."""
    if all(t.dtype == torch.float32 for t in tensors.values()):
        return _F.ALL_F32
    matrices = Counter(t.dtype for t in tensors.values() if t.dim() >= 2)
    return _FILE_TYPES[matrices.most_common(1)[0][0]]


def model_metadata(arch: str, params: Any, name: str,
                   tensors: Mapping[str, torch.Tensor]) -> list[Entry]:
    """The general keys (the file type from ``tensors``, the export's), llama.cpp's
    ``<arch>.*`` shape keys and ``nnx.params.*``."""
    k = gguf.Keys
    entries: list[Entry] = [
        (k.General.NAME, name, _V.STRING),
        (k.General.FILE_TYPE, int(file_type(tensors)), _V.UINT32),
        (k.LLM.VOCAB_SIZE.format(arch=arch), params.vocab_size, _V.UINT32),
        (k.LLM.CONTEXT_LENGTH.format(arch=arch), params.max_seq_len, _V.UINT32),
        (k.LLM.EMBEDDING_LENGTH.format(arch=arch), params.d_model, _V.UINT32),
        (k.LLM.BLOCK_COUNT.format(arch=arch), params.n_layers, _V.UINT32),
        (k.LLM.FEED_FORWARD_LENGTH.format(arch=arch), params.ffn_width, _V.UINT32),
        (k.Attention.HEAD_COUNT.format(arch=arch), params.n_heads, _V.UINT32),
        # No grouped-query attention: every query head has its own key/value head.
        (k.Attention.HEAD_COUNT_KV.format(arch=arch), params.n_heads, _V.UINT32),
        (k.Attention.LAYERNORM_RMS_EPS.format(arch=arch), params.norm_eps, _V.FLOAT32),
        (k.Rope.FREQ_BASE.format(arch=arch), params.rope_base, _V.FLOAT32),
        (k.Rope.DIMENSION_COUNT.format(arch=arch), params.head_dim, _V.UINT32),
    ]
    for field, kind in HYPER_PARAMETERS.items():
        value = getattr(params, field)
        if value is not None:  # ffn_dim None: the width is ffn_mult × d_model
            entries.append((f"nnx.params.{field}", value, kind))
    return entries


def _merges(model: dict[str, Any]) -> list[str]:
    # tokenizers writes a merge as "a b" (older files) or ["a", "b"] (newer ones);
    # llama.cpp reads "a b".
    return [m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])]


def tokenizer_metadata(owner: str, tokenizer: Any, vocab_size: int) -> list[Entry]:
    """``tokenizer`` (an NNTokenizerParams) as GGUF keys, for a net of ``vocab_size``;
    a tokenizer llama.cpp would tokenize differently is refused (nnx.interop.vocab)."""
    tok = tokenizer.tokenizer
    document = tok.to_str()
    spec = json.loads(document)
    ggml_model, pre = ggml_tokenizer(owner, spec)
    by_id = {i: t for t, i in tok.get_vocab(with_added_tokens=True).items()}
    special = {t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
    added = {t["id"] for t in spec.get("added_tokens", [])}
    tokens, types = [], []
    for i in range(vocab_size):
        if i in by_id:
            tokens.append(by_id[i])
            types.append(gguf.TokenType.CONTROL if i in special else
                         gguf.TokenType.USER_DEFINED if i in added else gguf.TokenType.NORMAL)
        else:  # rows of the embedding no token reaches
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    model = spec["model"]
    k = gguf.Keys.Tokenizer
    entries: list[Entry] = [
        (k.MODEL, ggml_model, _V.STRING),
        (k.PRE, pre, _V.STRING),
        (k.LIST, tokens, _V.STRING),
        (k.TOKEN_TYPE, [int(t) for t in types], _V.INT32),
        (k.HF_JSON, document, _V.STRING),
    ]
    if model.get("merges"):  # GGUF has no empty arrays
        entries.append((k.MERGES, _merges(model), _V.STRING))
    for key, value in ((k.BOS_ID, tokenizer.bos_id), (k.EOS_ID, tokenizer.eos_id),
                       (k.PAD_ID, tokenizer.pad_id)):
        if value is not None:
            entries.append((key, value, _V.UINT32))
    return entries
