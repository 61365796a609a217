"""A tiny TransformerNN and byte-level BPE tokenizer the interop tests export."""

from __future__ import annotations

import torch

from nnx.lm import NNTokenizerParams, NNTransformerParams, TransformerNN

TEXT = "the cat sat on the mat. the dog sat on the log. " * 8


def tiny_net(*, tie: bool = True, vocab: int = 300, dtype: torch.dtype = torch.float32,
             seed: int = 0) -> TransformerNN:
    torch.manual_seed(seed)
    params = NNTransformerParams(vocab_size=vocab, d_model=32, n_heads=4, n_layers=2,
                                 max_seq_len=16, ffn_dim=48, tie_embeddings=tie,
                                 norm_eps=1e-6, rope_base=5000.0)
    net = TransformerNN(params).to(dtype)
    with torch.no_grad():  # norms away from their all-ones init, so a mix-up shows
        for p in net.parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
    return net


def tiny_tokenizer(vocab: int = 280) -> NNTokenizerParams:
    return NNTokenizerParams.train(TEXT, vocab_size=vocab, min_frequency=1)
