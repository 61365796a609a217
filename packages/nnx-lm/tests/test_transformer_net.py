"""TransformerNN, RMSNorm, RoPE and the KV cache (spec §15)."""

from __future__ import annotations

import math

import pytest
import torch

from nnx.lm.layers import RMSNorm, RoPE
from nnx.lm.net import TransformerNN
from nnx.lm.params import NNTransformerParams


def _tiny(seed: int = 0, **overrides: object) -> TransformerNN:
    torch.manual_seed(seed)
    shape: dict[str, object] = {"vocab_size": 61, "d_model": 32, "n_heads": 4, "n_layers": 2,
                                "max_seq_len": 300, **overrides}
    net = TransformerNN(NNTransformerParams(**shape))  # type: ignore[arg-type]
    with torch.no_grad():  # spread the logits: a near-uniform random model ties its argmax
        for p in net.parameters():
            if p.dim() > 1:
                p.normal_(std=0.2)
    return net.eval()


def test_cached_greedy_decoding_equals_full_recomputation_over_256_tokens() -> None:
    net = _tiny()
    prompt = torch.tensor([[3, 14, 15, 9, 2, 6, 5]])
    full_ids = prompt.clone()
    with torch.no_grad():
        logits, cache = net.forward_with_cache(prompt)
        step = logits[:, -1]
        cached_ids = prompt.clone()
        worst = 0.0
        for _ in range(256):
            reference = net(full_ids)[:, -1]  # recompute the whole sequence
            worst = max(worst, float((reference - step).abs().max()))
            assert torch.allclose(step, reference, atol=1e-5, rtol=0), worst
            nxt = reference.argmax(-1, keepdim=True)
            assert torch.equal(step.argmax(-1, keepdim=True), nxt)
            full_ids = torch.cat((full_ids, nxt), dim=1)
            cached_ids = torch.cat((cached_ids, step.argmax(-1, keepdim=True)), dim=1)
            logits, cache = net.forward_with_cache(nxt, cache)
            step = logits[:, -1]
    assert torch.equal(cached_ids, full_ids)
    assert cache[0][0].shape[2] == prompt.shape[1] + 256
    assert len(set(full_ids[0, prompt.shape[1]:].tolist())) > 1  # not one token repeated


def test_a_chunk_after_the_cache_matches_the_full_forward() -> None:
    net = _tiny(1)
    ids = torch.randint(0, 61, (2, 12))
    with torch.no_grad():
        head, cache = net.forward_with_cache(ids[:, :5])
        tail, cache = net.forward_with_cache(ids[:, 5:], cache)
        assert torch.allclose(torch.cat((head, tail), 1), net(ids), atol=1e-5, rtol=0)


def test_dropout_is_active_in_training_and_off_in_eval() -> None:
    net = _tiny(2, attn_dropout=0.5, resid_dropout=0.5)
    ids = torch.randint(0, 61, (2, 10))
    with torch.no_grad():
        assert torch.equal(net(ids), net(ids))  # eval: deterministic
        net.train()
        assert not torch.equal(net(ids), net(ids))


def test_max_seq_len_is_refused_past_its_end() -> None:
    net = _tiny(3, max_seq_len=8)
    with torch.no_grad():
        assert net(torch.zeros(1, 8, dtype=torch.long)).shape == (1, 8, 61)
        with pytest.raises(ValueError, match="max_seq_len"):
            net(torch.zeros(1, 9, dtype=torch.long))
        _, cache = net.forward_with_cache(torch.zeros(1, 8, dtype=torch.long))
        with pytest.raises(ValueError, match=r"8 cached \+ 1 new tokens is past max_seq_len"):
            net.forward_with_cache(torch.zeros(1, 1, dtype=torch.long), cache)


def test_embeddings_are_tied_unless_untied() -> None:
    tied = _tiny()
    assert tied.lm_head is None
    assert "lm_head.weight" not in tied.state_dict()
    untied = _tiny(tie_embeddings=False)
    assert untied.lm_head is not None
    assert untied.lm_head.weight.data_ptr() != untied.embed.weight.data_ptr()


def test_the_net_is_causal() -> None:
    net = _tiny(4)
    ids = torch.randint(0, 61, (1, 10))
    changed = ids.clone()
    changed[0, 6] = (changed[0, 6] + 1) % 61
    with torch.no_grad():
        a, b = net(ids), net(changed)
    assert torch.equal(a[:, :6], b[:, :6])
    assert not torch.equal(a[:, 6:], b[:, 6:])


def test_rmsnorm_normalizes_and_validates_eps() -> None:
    norm = RMSNorm(4, eps=0.0)
    x = torch.tensor([[1.0, -1.0, 1.0, -1.0], [2.0, 2.0, 2.0, 2.0]])
    assert torch.allclose(norm(x), torch.tensor([[1.0, -1.0, 1.0, -1.0], [1.0] * 4]))
    for bad in (math.nan, -1e-6, True, "1e-5"):
        with pytest.raises(ValueError, match=r"RMSNorm\.eps"):
            RMSNorm(4, eps=bad)  # type: ignore[arg-type]


def test_rope_validates_and_rotates_by_position() -> None:
    for bad in (0, -1.0, math.nan, math.inf, True):
        with pytest.raises(ValueError, match=r"RoPE\.base"):
            RoPE(8, 16, base=bad)  # type: ignore[arg-type]
    for kwargs in ({"dim": 8.0, "max_seq_len": 16}, {"dim": 8, "max_seq_len": True}):
        with pytest.raises(ValueError, match=r"RoPE\.(dim|max_seq_len) must be an integer"):
            RoPE(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="even"):
        RoPE(7, 16)
    rope = RoPE(8, 16)
    x = torch.randn(1, 1, 5, 8)
    assert torch.allclose(rope(x)[..., 0, :], x[..., 0, :])  # position 0 is unrotated
    assert torch.allclose(rope(x).norm(dim=-1), x.norm(dim=-1), atol=1e-6)  # a rotation
    assert torch.allclose(rope(x[..., 3:, :], offset=3), rope(x)[..., 3:, :])
    with pytest.raises(ValueError, match="past max_seq_len"):
        rope(x, offset=12)


def test_rmsnorm_computes_a_float64_input_in_float64() -> None:
    """Issue 26 item 16: rows scaled by 1e25 came out all zeros (their squares overflow in
    float32); in float64 they equal the float64 formula, and half precision still goes
    through float32 exactly as before."""
    norm = RMSNorm(4, eps=1e-5).double()
    x = torch.tensor([[1.0, -2.0, 3.0, 0.5]], dtype=torch.float64) * 1e25
    expected = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5)
    out = norm(x)
    assert out.dtype == torch.float64 and out.abs().min() > 0
    assert torch.equal(out, expected * norm.weight)
    half = torch.tensor([[1.0, -2.0, 3.0, 0.5]], dtype=torch.bfloat16)
    h = half.float()
    ref = (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-5)).to(torch.bfloat16)
    assert torch.equal(RMSNorm(4)(half), RMSNorm(4).weight * ref)


@pytest.mark.parametrize("generative", [False, True])
def test_predict_takes_the_argmax_over_the_vocabulary_not_the_sequence(generative: bool) -> None:
    """issue 26 item 13: (2, 4, 32) logits give (2, 4) classes (the net's class_axis)."""
    from nnx import GenerativeNNModel, Nets, NNModel, NNModelParams

    shape = NNTransformerParams(vocab_size=32, d_model=8, n_heads=2, n_layers=1, max_seq_len=8)
    torch.manual_seed(0)
    cls = GenerativeNNModel if generative else NNModel
    model = cls(shape, NNModelParams(net=Nets.TRANSFORMER))
    ids = torch.randint(0, 32, (2, 4), generator=torch.Generator().manual_seed(1))
    result = model.predict(ids)
    assert tuple(result.logits.shape) == (2, 4, 32)
    assert tuple(result.classes.shape) == (2, 4)
    assert torch.equal(result.classes, result.logits.argmax(-1))


def test_the_plain_forward_keeps_no_cache_and_no_block_returns_a_view() -> None:
    """forward() is forward_with_cache()'s logits, but no block hands back its keys and
    values: they are views, which FSDP2 warns about when a shard unit returns one."""
    net = _tiny()
    ids = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(3))
    returned: list = []
    hooks = [b.register_forward_hook(lambda m, a, out: returned.append(out))
             for b in net.blocks]
    logits = net(ids)
    for hook in hooks:
        hook.remove()
    assert len(returned) == len(net.blocks)
    assert all(kv is None and x._base is None for x, kv in returned)
    assert torch.equal(logits, net.forward_with_cache(ids)[0])
    with pytest.raises(ValueError, match=r"shape \(batch, T\)"):
        net(ids[0])
