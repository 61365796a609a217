"""PrefixTuner (spec §11): learned per-layer K/V prefixes patched into a frozen TransformerNN."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
from torch import nn

pytest.importorskip("nnx.lm")

from nnx import GenerativeNNModel, Nets, NNModelParams, NNOptimParams, build_param_groups
from nnx.lm import NNTransformerParams, TransformerNN
from nnx.peft import PrefixTuner, PromptTuner, load_prefix_weights, save_prefix_weights

VOCAB, D, H = 23, 16, 2
HD = D // H


def _net(seed: int = 0, **over: object) -> TransformerNN:
    torch.manual_seed(seed)
    shape: dict[str, object] = {"vocab_size": VOCAB, "d_model": D, "n_heads": H,
                                "n_layers": 2, "max_seq_len": 40, **over}
    net = TransformerNN(NNTransformerParams(**shape))  # type: ignore[arg-type]
    with torch.no_grad():  # spread the logits so greedy decoding does not tie
        for p in net.parameters():
            if p.dim() > 1:
                p.normal_(std=0.2)
    return net.eval()


class _Wrapper(nn.Module):
    """An adapter-shaped wrapper (as part 1's LoRALinear): ``.base`` plus a delta, no
    ``.weight`` of its own."""

    def __init__(self, base: nn.Linear) -> None:
        super().__init__()
        self.base = base
        self.delta = nn.Linear(base.in_features, base.out_features, bias=False,
                               dtype=base.weight.dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.base(x) + self.delta(x)
        return out


def _groups(module: nn.Module) -> list[tuple[str, list[int]]]:
    """Param-group membership as the optimizer would build it."""
    return [(g["name"], [id(p) for p in g["params"]])
            for g in build_param_groups(module, NNOptimParams())]


def _qkv_weight(proj: nn.Module) -> torch.Tensor:
    if isinstance(proj, _Wrapper):
        return proj.base.weight + proj.delta.weight
    assert isinstance(proj, nn.Linear)
    return proj.weight


def _reference(net: TransformerNN, tuner: PrefixTuner, ids: torch.Tensor) -> torch.Tensor:
    """The whole forward by hand, concatenating each layer's prefix to its K/V."""
    x = net.embed(ids)
    b, t = ids.shape
    p = tuner.n_prefix
    # every query sees every prefix slot; the tokens causally, at positions 0..T-1
    allowed = torch.cat((torch.ones(t, p, dtype=torch.bool),
                         torch.ones(t, t, dtype=torch.bool).tril()), dim=1)
    for i, block in enumerate(net.blocks):
        attn = block.attn
        h = block.attn_norm(x)
        q, k, v = (z.view(b, t, H, HD).transpose(1, 2)
                   for z in (h @ _qkv_weight(attn.qkv).T).split(D, dim=-1))
        q, k = net.rope(q), net.rope(k)
        keys = torch.cat((tuner.prefix_keys[i].expand(b, -1, -1, -1), k), dim=2)
        values = torch.cat((tuner.prefix_values[i].expand(b, -1, -1, -1), v), dim=2)
        scores = (q @ keys.transpose(-1, -2) / math.sqrt(HD)).masked_fill(~allowed, -math.inf)
        y = (scores.softmax(-1) @ values).transpose(1, 2).reshape(b, t, D)
        x = x + y @ attn.out.weight.T
        x = x + block.ffn(block.ffn_norm(x))
    return net.norm(x) @ net.embed.weight.T


def test_logits_equal_a_hand_built_key_value_prefix() -> None:
    net = _net().double()
    tuner = PrefixTuner(net, 3)
    ids = torch.randint(0, VOCAB, (2, 6))
    with torch.no_grad():
        ref = _reference(net, tuner, ids)
        torch.testing.assert_close(tuner(ids), ref, atol=1e-6, rtol=0)
        torch.testing.assert_close(net(ids), ref, atol=1e-6, rtol=0)  # the net is patched
        plain = _net().double()(ids)
    assert not torch.allclose(plain, ref, atol=1e-3)  # the prefix is really in the path


def test_prefix_shapes_freezing_and_gradients() -> None:
    net = _net()
    keys_before = dict(net.state_dict())
    tuner = PrefixTuner(net, 4)
    assert [tuple(p.shape) for p in tuner.prefix_keys] == [(H, 4, HD)] * 2
    assert [tuple(p.shape) for p in tuner.prefix_values] == [(H, 4, HD)] * 2
    assert not any(p.requires_grad for p in net.parameters())
    assert list(net.state_dict()) == list(keys_before)  # patching adds no key to the net
    tuner(torch.randint(0, VOCAB, (1, 5))).sum().backward()
    assert all(p.grad is not None for p in (*tuner.prefix_keys, *tuner.prefix_values))
    assert all(p.grad is None for p in net.parameters())


def test_prefixes_take_each_projection_dtype_and_device() -> None:
    tuner = PrefixTuner(_net().double(), 2)
    assert {p.dtype for p in tuner.parameters()} == {torch.float64}
    with torch.device("meta"):
        skeleton = TransformerNN(NNTransformerParams(vocab_size=VOCAB, d_model=D, n_heads=H,
                                                     n_layers=2, max_seq_len=40))
    meta = PrefixTuner(skeleton, 2)
    assert {p.device.type for p in meta.prefix_keys} == {"meta"}
    assert {p.device.type for p in skeleton.parameters()} == {"meta"}  # never moved


def test_an_adapted_projection_places_the_prefix_and_stays_in_the_path_frozen() -> None:
    net = _net().double()
    for block in net.blocks:
        block.attn.qkv = _Wrapper(block.attn.qkv)  # type: ignore[arg-type]
        with torch.no_grad():
            block.attn.qkv.delta.weight.normal_(std=0.1)
    tuner = PrefixTuner(net, 2)
    assert {p.dtype for p in tuner.prefix_keys} == {torch.float64}
    assert not any(p.requires_grad for p in net.parameters())  # the adapter froze too
    ids = torch.randint(0, VOCAB, (1, 5))
    with torch.no_grad():
        torch.testing.assert_close(tuner(ids), _reference(net, tuner, ids), atol=1e-6, rtol=0)


def test_cached_generation_gives_the_uncached_tokens() -> None:
    torch.manual_seed(0)
    model = GenerativeNNModel(
        net_params=NNTransformerParams(vocab_size=VOCAB, d_model=D, n_heads=H, n_layers=2,
                                       max_seq_len=40),
        params=NNModelParams(net=Nets.TRANSFORMER))
    with torch.no_grad():
        for p in model.net.parameters():
            if p.dim() > 1:
                p.normal_(std=0.2)
    tuner = PrefixTuner(model.net, 3)
    prompt = [3, 1, 4, 1, 5]
    cached = model.generate(prompt, max_new_tokens=20, temperature=0)
    full = model.generate(prompt, max_new_tokens=20, temperature=0, use_cache=False)
    assert cached == full and len(cached) == 20  # type: ignore[arg-type]
    ids = torch.tensor([prompt])
    with torch.no_grad():  # and step by step, logit for logit
        logits, cache = tuner.forward_with_cache(ids[:, :3])
        tail, cache = tuner.forward_with_cache(ids[:, 3:4], cache)
        last, cache = tuner.forward_with_cache(ids[:, 4:], cache)
        torch.testing.assert_close(torch.cat((logits, tail, last), 1), tuner(ids),
                                   atol=1e-5, rtol=0)
    assert cache[0][0].shape[2] == 5  # the prefix never enters the cache


def test_wrapping_an_already_tuned_net_raises_and_changes_nothing() -> None:
    net = _net()
    tuner = PrefixTuner(net, 2)
    forwards = [vars(b.attn)["forward"] for b in net.blocks]
    state = {k: v.clone() for k, v in tuner.state_dict().items()}
    groups = _groups(tuner)
    with pytest.raises(ValueError, match="already prefix-tuned"):
        PrefixTuner(net, 3)
    assert _groups(tuner) == groups
    assert [vars(b.attn)["forward"] for b in net.blocks] == forwards
    now = tuner.state_dict()
    assert now.keys() == state.keys() and all(torch.equal(now[k], state[k]) for k in state)


@pytest.mark.parametrize("n", [0, -1, True, 1.5])
def test_a_bad_prefix_length_is_refused_before_anything_changes(n: object) -> None:
    net = _net()
    groups = _groups(net)
    with pytest.raises(ValueError, match="n_prefix"):
        PrefixTuner(net, n)  # type: ignore[arg-type]
    assert _groups(net) == groups
    assert all(p.requires_grad for p in net.parameters())
    assert not any("forward" in vars(b.attn) for b in net.blocks)


def test_deepcopy_forks_the_tuner() -> None:
    tuner = PrefixTuner(_net(), 2)
    fork = copy.deepcopy(tuner)
    assert fork.net is not tuner.net
    with torch.no_grad():
        fork.prefix_keys[0].add_(1.0)
        fork.prefix_values[1].mul_(-1.0)
    ids = torch.randint(0, VOCAB, (2, 4))
    with torch.no_grad():
        mine, theirs = tuner(ids), fork(ids)
        torch.testing.assert_close(mine, _reference(tuner.net, tuner, ids), atol=1e-5, rtol=0)
        torch.testing.assert_close(theirs, _reference(fork.net, fork, ids), atol=1e-5, rtol=0)
    assert not torch.allclose(mine, theirs)
    assert not torch.equal(tuner.prefix_keys[0], fork.prefix_keys[0])


def test_mode_is_copied_from_the_net_onto_the_tuner_and_its_prefix_lists() -> None:
    net = _net()
    net.blocks[0].train()  # mixed modes: each child keeps its own
    modes = [m.training for m in net.modules()]
    tuner = PrefixTuner(net, 2)
    assert (tuner.training, tuner.prefix_keys.training, tuner.prefix_values.training) == (
        False, False, False)
    assert [m.training for m in net.modules()] == modes
    trained = PrefixTuner(_net().train(), 2)
    assert (trained.training, trained.prefix_keys.training) == (True, True)


def test_save_selects_by_ownership_and_load_restores(tmp_path: Path) -> None:
    net = _net()
    net.prefix_keys_projection = nn.Linear(2, 2)  # a base layer merely named like the prefix
    tuner = PrefixTuner(net, 2)
    path = save_prefix_weights(tuner, tmp_path / "prefix.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prefix.pt"]  # atomic: no temp left
    saved = torch.load(path, weights_only=True)
    assert list(saved) == ["prefix_keys.0", "prefix_keys.1", "prefix_values.0",
                           "prefix_values.1"]
    assert list(tuner.prefix_state_dict()) == list(saved)
    fresh = PrefixTuner(_net(), 2)
    fresh.eval()
    fresh.prefix_values.train()
    modes = [m.training for m in fresh.modules()]
    assert load_prefix_weights(fresh, path) == 4
    assert [m.training for m in fresh.modules()] == modes  # loading leaves modes alone
    ids = torch.randint(0, VOCAB, (1, 6))
    with torch.no_grad():
        assert torch.equal(fresh(ids), tuner(ids))


def test_a_full_checkpoint_cannot_overwrite_the_frozen_base() -> None:
    tuner = PrefixTuner(_net(), 2)
    full = {k: v + 1 for k, v in copy.deepcopy(tuner).state_dict().items()}
    base = {k: v.clone() for k, v in tuner.net.state_dict().items()}
    assert load_prefix_weights(tuner, full) == 4
    assert torch.equal(tuner.prefix_values[1], full["prefix_values.1"])
    assert all(torch.equal(v, base[k]) for k, v in tuner.net.state_dict().items())


def test_refused_loads_change_nothing() -> None:
    tuner = PrefixTuner(_net(), 2)
    before = {k: v.clone() for k, v in tuner.prefix_state_dict().items()}
    good = {k: v + 1 for k, v in before.items()}
    with pytest.raises(RuntimeError, match="size mismatch"):  # torch's own error
        load_prefix_weights(tuner, {**good, "prefix_values.1": torch.zeros(H, 3, HD)})
    missing = dict(good)
    del missing["prefix_keys.1"]
    with pytest.raises(ValueError, match=r"no prefix_keys\.1"):
        load_prefix_weights(tuner, missing)
    with pytest.raises(TypeError, match="path or a state dict"):
        load_prefix_weights(tuner, 7)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a PrefixTuner"):
        load_prefix_weights(tuner.net, good)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a PrefixTuner"):
        save_prefix_weights(tuner.net, "x.pt")  # type: ignore[arg-type]
    now = tuner.prefix_state_dict()
    assert all(torch.equal(now[k], before[k]) for k in before)  # not even the good keys


def test_loading_keeps_the_destination_dtype(tmp_path: Path) -> None:
    path = save_prefix_weights(PrefixTuner(_net(), 2), tmp_path / "p.pt")
    dest = PrefixTuner(_net().double(), 2)
    load_prefix_weights(dest, path)
    assert {p.dtype for p in dest.parameters()} == {torch.float64}


def test_a_whole_tuner_pickles_and_reloads_working(tmp_path: Path) -> None:
    tuner = PrefixTuner(_net(), 2)
    torch.save(tuner, tmp_path / "whole.pt")
    back = torch.load(tmp_path / "whole.pt", weights_only=False)
    ids = torch.randint(0, VOCAB, (1, 5))
    with torch.no_grad():
        assert torch.equal(back(ids), tuner(ids))
        back.prefix_keys[0].zero_()  # the reloaded patch reads the reloaded prefixes
        torch.testing.assert_close(back(ids), _reference(back.net, back, ids), atol=1e-5,
                                   rtol=0)


def test_a_prompt_tuner_composes_over_a_prefix_tuned_net() -> None:
    net = _net()
    prefix = PrefixTuner(net, 2)
    prompt = PromptTuner(net, 3)
    ids = torch.randint(0, VOCAB, (1, 4))
    with torch.no_grad():
        embeds = torch.cat((prompt.soft_prompt.unsqueeze(0), net.embed(ids)), dim=1)
        ref, _ = net.forward_embeddings(embeds)  # the patched net: prefix included
        torch.testing.assert_close(prompt(ids), ref[:, 3:], atol=1e-6, rtol=0)
    assert {n for n, p in prefix.named_parameters() if p.requires_grad} == {
        "prefix_keys.0", "prefix_keys.1", "prefix_values.0", "prefix_values.1"}


def test_a_prefix_file_from_a_deeper_model_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    """Issue 26 item 7: a 2-layer file into a 1-layer tuner used to load 2 tensors and drop
    the rest; it is refused, as the shallower file is."""
    deep = PrefixTuner(_net(n_layers=2), 2)
    path = save_prefix_weights(deep, tmp_path / "deep.pt")
    shallow = PrefixTuner(_net(1, n_layers=1), 2)
    before = {k: v.clone() for k, v in shallow.prefix_state_dict().items()}
    with pytest.raises(ValueError, match=r"prefix_keys\.1, prefix_values\.1.*larger module "
                                         r"\(2 tensors here, 4 there\)"):
        load_prefix_weights(shallow, path)
    now = shallow.prefix_state_dict()
    assert list(now) == list(before) and all(torch.equal(now[k], before[k]) for k in before)
    # the same-depth file still loads, and a base layer merely named like a prefix is not
    # mistaken for one
    same = save_prefix_weights(PrefixTuner(_net(2, n_layers=1), 2), tmp_path / "same.pt")
    assert load_prefix_weights(shallow, same) == 2
