"""TransformerNN's two hook points for nnx-peft: forward over input embeddings and
attention with extra prefix keys/values. Both leave the plain path bit for bit alone."""

from __future__ import annotations

import pytest
import torch

from nnx.lm.net import TransformerNN
from nnx.lm.params import NNTransformerParams


def _tiny(seed: int = 0) -> TransformerNN:
    torch.manual_seed(seed)
    return TransformerNN(NNTransformerParams(vocab_size=37, d_model=16, n_heads=2, n_layers=2,
                                             max_seq_len=24)).eval()


def test_forward_embeddings_of_embed_ids_is_the_ids_forward_bit_for_bit() -> None:
    net = _tiny()
    ids = torch.randint(0, 37, (2, 7))
    with torch.no_grad():
        logits, cache = net.forward_with_cache(ids)
        via, via_cache = net.forward_embeddings(net.embed(ids))
        more, _ = net.forward_embeddings(net.embed(ids[:, :1]), via_cache)
        more_ref, _ = net.forward_with_cache(ids[:, :1], cache)
    assert torch.equal(via, logits)
    assert len(cache) == len(via_cache)
    for pa, pb in zip(cache, via_cache, strict=True):
        assert torch.equal(pa[0], pb[0]) and torch.equal(pa[1], pb[1])
    assert torch.equal(more, more_ref)


def test_forward_embeddings_refuses_bad_shapes_and_overlong_input() -> None:
    net = _tiny()
    with pytest.raises(ValueError, match=r"\(batch, T, 16\)"):
        net.forward_embeddings(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"\(batch, T, 16\)"):
        net.forward_embeddings(torch.zeros(1, 3, 15))
    with pytest.raises(ValueError, match="past max_seq_len"):
        net.forward_embeddings(torch.zeros(1, 25, 16))


def test_attend_without_a_prefix_is_forward_and_with_one_keeps_it_out_of_the_cache() -> None:
    net = _tiny(1)
    attn = net.blocks[0].attn
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        y, kv = attn(x, None)
        y2, kv2 = attn.attend(x, None)
        prefix = (torch.randn(2, 2, 3, 8), torch.randn(2, 2, 3, 8))
        y3, kv3 = attn.attend(x, None, prefix)
        # a cached step with a prefix sees the prefix and every cached key
        _, kv4 = attn.attend(x[:, :1], kv3, prefix)
    assert torch.equal(y, y2) and torch.equal(kv[0], kv2[0]) and torch.equal(kv[1], kv2[1])
    assert not torch.allclose(y3, y)
    assert torch.equal(kv3[0], kv[0]) and torch.equal(kv3[1], kv[1])  # no prefix in the cache
    assert kv4[0].shape[2] == 6
