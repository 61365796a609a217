"""A TransformerNN's tensors under a GGUF architecture's names, in its layout.

``nnx_transformer``: NNx's own state-dict names, with the fused QKV projection split into
``attn.q`` / ``attn.k`` / ``attn.v`` (the SwiGLU's gate, up and down are separate Linears
already), so a reader finds every projection by a stable name whatever fusing NNx does.

``llama``: the names llama.cpp gives a Llama (taken from gguf's own tables, so they follow
gguf-py), and its layout: llama.cpp rotates channel pairs (2i, 2i+1) of each head, NNx's
RoPE rotates (i, i + head_dim/2) as Hugging Face's Llama does, so the q and k rows of every
head are interleaved the way llama.cpp's converter interleaves a Hugging Face checkpoint's.
A tied output projection writes no ``output.weight``: llama.cpp then reuses
``token_embd.weight``, as it does for a tied Hugging Face checkpoint.
"""

from __future__ import annotations

from typing import Any

import gguf
import torch

__all__ = ["interleave_heads", "llama_tensors", "nnx_tensors"]


def _split_qkv(state: dict[str, torch.Tensor], block: str) -> list[torch.Tensor]:
    return list(state[f"{block}attn.qkv.weight"].chunk(3, dim=0))


def nnx_tensors(net: Any) -> dict[str, torch.Tensor]:
    """``net``'s tensors under their nnx_transformer names, in state-dict order."""
    state = net.state_dict()
    out: dict[str, torch.Tensor] = {}
    for name, tensor in state.items():
        if name.endswith("attn.qkv.weight"):
            block = name[: -len("attn.qkv.weight")]
            for part, piece in zip("qkv", _split_qkv(state, block), strict=True):
                out[f"{block}attn.{part}.weight"] = piece
        else:
            out[name] = tensor
    return out


def interleave_heads(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """The rows of a q or k projection reordered per head from the rotate-half pairing
    (i, i + head_dim/2) to adjacent pairs (2i, 2i+1): new row 2i is old row i and new row
    2i+1 is old row i + head_dim/2."""
    rows = weight.shape[0]
    half = rows // n_heads // 2
    return weight.reshape(n_heads, 2, half, *weight.shape[1:]).transpose(1, 2).reshape(
        weight.shape)


def _llama(kind: gguf.MODEL_TENSOR, block: int | None = None) -> str:
    base = gguf.TENSOR_NAMES[kind]
    return (base if block is None else base.format(bid=block)) + ".weight"


_T = gguf.MODEL_TENSOR
#: NNx's per-block names → llama.cpp's tensors (q and k are added with the interleave).
_BLOCK = {
    "attn.out.weight": _T.ATTN_OUT,
    "attn_norm.weight": _T.ATTN_NORM,
    "ffn_norm.weight": _T.FFN_NORM,
    "ffn.gate.weight": _T.FFN_GATE,
    "ffn.up.weight": _T.FFN_UP,
    "ffn.down.weight": _T.FFN_DOWN,
}


def llama_tensors(net: Any) -> dict[str, torch.Tensor]:
    """``net``'s tensors under llama.cpp's Llama names, q and k interleaved per head."""
    params, state = net.params, net.state_dict()
    out = {_llama(_T.TOKEN_EMBD): state["embed.weight"]}
    for i in range(params.n_layers):
        block = f"blocks.{i}."
        q, k, v = _split_qkv(state, block)
        out[_llama(_T.ATTN_Q, i)] = interleave_heads(q, params.n_heads)
        out[_llama(_T.ATTN_K, i)] = interleave_heads(k, params.n_heads)
        out[_llama(_T.ATTN_V, i)] = v
        for ours, kind in _BLOCK.items():
            out[_llama(kind, i)] = state[block + ours]
    out[_llama(_T.OUTPUT_NORM)] = state["norm.weight"]
    if not params.tie_embeddings:
        out[_llama(_T.OUTPUT)] = state["lm_head.weight"]
    return out
