"""TransformerNN: a decoder-only transformer with a KV cache (spec §15)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nnx.extend import NetRegistration
from nnx.lm.layers import RMSNorm, RoPE
from nnx.lm.params import NNTransformerParams

__all__ = ["TRANSFORMER", "KVCache", "TransformerNN"]

#: One ``(keys, values)`` pair per layer, each ``(batch, heads, length, head_dim)``.
KVCache = tuple[tuple[torch.Tensor, torch.Tensor], ...]


class _Attention(nn.Module):
    def __init__(self, params: NNTransformerParams, rope: RoPE) -> None:
        super().__init__()
        self.n_heads, self.head_dim = params.n_heads or 1, params.head_dim
        self.qkv = nn.Linear(params.d_model, 3 * params.d_model, bias=False)  # fused q, k, v
        self.out = nn.Linear(params.d_model, params.d_model, bias=False)
        self.dropout = params.attn_dropout
        self.rope = rope

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        return self.attend(x, past)

    def attend(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None,
               prefix: tuple[torch.Tensor, torch.Tensor] | None = None
               ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        """``forward``, optionally with ``prefix`` keys and values ahead of every key.

        ``prefix`` is ``(keys, values)``, each ``(batch, heads, P, head_dim)``: used
        as given (no rotation), seen by every query, and kept out of the returned
        cache, so token positions and the cache length are the same as without it
        (the hook point nnx-peft's PrefixTuner patches ``forward`` onto).
        """
        b, t, d = x.shape
        q, k, v = (p.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)
                   for p in self.qkv(x).split(d, dim=-1))
        offset = 0 if past is None else past[0].shape[2]
        # New positions continue after the cached ones.
        q, k = self.rope(q, offset), self.rope(k, offset)
        if past is not None:
            k, v = torch.cat((past[0], k), dim=2), torch.cat((past[1], v), dim=2)
        if prefix is None:
            mask = None
            if offset and t > 1:  # a chunk after a cache: query i sees keys up to offset + i
                mask = torch.ones(t, offset + t, dtype=torch.bool, device=x.device).tril(offset)
            y = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, is_causal=offset == 0 and t > 1,
                dropout_p=self.dropout if self.training else 0.0)
        else:
            slots = prefix[0].shape[2]
            # Every query sees every prefix slot, then the tokens causally.
            causal = torch.ones(t, offset + t, dtype=torch.bool, device=x.device).tril(offset)
            mask = torch.cat((causal.new_ones(t, slots), causal), dim=1)
            y = F.scaled_dot_product_attention(
                q, torch.cat((prefix[0], k), dim=2), torch.cat((prefix[1], v), dim=2),
                attn_mask=mask, dropout_p=self.dropout if self.training else 0.0)
        return self.out(y.transpose(1, 2).reshape(b, t, d)), (k, v)


class _SwiGLU(nn.Module):
    def __init__(self, d_model: int, hidden: int) -> None:
        super().__init__()
        self.gate = nn.Linear(d_model, hidden, bias=False)
        self.up = nn.Linear(d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.down(F.silu(self.gate(x)) * self.up(x))
        return out


class _Block(nn.Module):
    """Pre-norm: ``x + drop(attn(norm(x)))``, then ``x + drop(ffn(norm(x)))``."""

    def __init__(self, params: NNTransformerParams, rope: RoPE) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(params.d_model, params.norm_eps)
        self.attn = _Attention(params, rope)
        self.ffn_norm = RMSNorm(params.d_model, params.norm_eps)
        self.ffn = _SwiGLU(params.d_model, params.ffn_width)
        self.drop = nn.Dropout(params.resid_dropout)

    def forward(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None,
                keep_cache: bool = True
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """The block's output, and its keys and values for the cache (None unless
        ``keep_cache``: they are views, which a sharding wrapper such as FSDP2 warns about
        when a block returns them)."""
        h, kv = self.attn(self.attn_norm(x), past)
        x = x + self.drop(h)
        return x + self.drop(self.ffn(self.ffn_norm(x))), (kv if keep_cache else None)


class TransformerNN(nn.Module):
    """Token ids ``(batch, T)`` → next-token logits ``(batch, T, vocab_size)``.

    RMSNorm pre-norm blocks with rotary positions, fused QKV, causal
    ``scaled_dot_product_attention`` and a SwiGLU FFN; the output projection is
    the input embedding when ``tie_embeddings`` (the default).
    """

    #: The vocabulary is the last axis of the logits, not axis 1 (core's
    #: ``net_class_axis``): ``predict()`` gives ``(batch, T)`` token classes.
    class_axis = -1

    def __init__(self, params: NNTransformerParams) -> None:
        super().__init__()
        if not isinstance(params, NNTransformerParams):
            raise TypeError(f"TransformerNN needs NNTransformerParams; got "
                            f"{type(params).__name__}")
        self.params = params
        self.embed = nn.Embedding(params.vocab_size, params.d_model)
        # One table for every layer: the positions are the same.
        self.rope = RoPE(params.head_dim, params.max_seq_len, params.rope_base)
        self.blocks = nn.ModuleList(_Block(params, self.rope) for _ in range(params.n_layers))
        self.norm = RMSNorm(params.d_model, params.norm_eps)
        self.lm_head: nn.Linear | None = (
            None if params.tie_embeddings
            else nn.Linear(params.d_model, params.vocab_size, bias=False))
        self.drop = nn.Dropout(params.resid_dropout)
        self.apply(_init)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Next-token logits for ``ids``, keeping no cache (training, scoring)."""
        self._check_ids(ids, None)
        return self._run(self.embed(ids), None, keep_cache=False)[0]

    def forward_with_cache(self, ids: torch.Tensor, cache: KVCache | None = None
                           ) -> tuple[torch.Tensor, KVCache]:
        """Logits for ``ids`` after the cached positions, and the cache extended by them.

        Call it once on the prompt (prefill, ``cache=None``), then with one new
        token at a time; each call's positions start at the cache length.
        """
        self._check_ids(ids, cache)
        return self._run(self.embed(ids), cache)

    def _check_ids(self, ids: torch.Tensor, cache: KVCache | None) -> None:
        if ids.dim() != 2:
            raise ValueError(f"TransformerNN takes token ids of shape (batch, T); got "
                             f"{tuple(ids.shape)}")
        self._check_room(cache, ids.shape[1])

    def forward_embeddings(self, embeds: torch.Tensor, cache: KVCache | None = None
                           ) -> tuple[torch.Tensor, KVCache]:
        """``forward_with_cache`` over input embeddings ``(batch, T, d_model)`` instead of
        ids (Hugging Face's ``inputs_embeds``): what ``embed(ids)`` would give, or a
        soft prompt concatenated ahead of it (nnx-peft's PromptTuner)."""
        d = self.params.d_model
        if embeds.dim() != 3 or embeds.shape[-1] != d:
            raise ValueError(f"TransformerNN.forward_embeddings takes embeddings of shape "
                             f"(batch, T, {d}); got {tuple(embeds.shape)}")
        self._check_room(cache, embeds.shape[1])
        return self._run(embeds, cache)

    def _check_room(self, cache: KVCache | None, new: int) -> None:
        length = 0 if cache is None else cache[0][0].shape[2]
        if length + new > self.params.max_seq_len:
            raise ValueError(f"TransformerNN: {length} cached + {new} new tokens is "
                             f"past max_seq_len ({self.params.max_seq_len})")

    def _run(self, embeds: torch.Tensor, cache: KVCache | None, keep_cache: bool = True
             ) -> tuple[torch.Tensor, KVCache]:
        x = self.drop(embeds)
        new: list[tuple[torch.Tensor, torch.Tensor]] = []
        for i, block in enumerate(self.blocks):
            x, kv = block(x, None if cache is None else cache[i], keep_cache)
            if kv is not None:
                new.append(kv)
        x = self.norm(x)
        weight = self.embed.weight if self.lm_head is None else self.lm_head.weight
        return F.linear(x, weight), tuple(new)


def _init(module: nn.Module) -> None:
    # Small normal weights (std 0.02, as GPT-2 / Llama do): the default Linear and
    # Embedding inits make a tied output projection's logits far too large.
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, std=0.02)


#: The ``nnx.nets`` entry: how ``Nets.TRANSFORMER`` builds, and its params class.
# compilable: model.train(compile=...) covers a TransformerNN fit by the default step
# (spec §28); generation (the KV-cache path) always runs eager.
TRANSFORMER = NetRegistration(build=TransformerNN, params_class=NNTransformerParams,
                              compilable=True)
