"""PromptTuner (spec §11): a soft prompt ahead of a frozen TransformerNN's input."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

pytest.importorskip("nnx.lm")

from nnx import NNOptimParams, build_param_groups
from nnx.lm import NNTransformerParams, TransformerNN
from nnx.peft import PromptTuner, load_prompt_weights, save_prompt_weights

VOCAB, D = 29, 16


def _net(seed: int = 0, **over: object) -> TransformerNN:
    torch.manual_seed(seed)
    shape: dict[str, object] = {"vocab_size": VOCAB, "d_model": D, "n_heads": 2,
                                "n_layers": 2, "max_seq_len": 16, **over}
    return TransformerNN(NNTransformerParams(**shape)).eval()  # type: ignore[arg-type]


Snapshot = tuple[dict[str, torch.Tensor], list[bool], list[bool], list[list[int]]]


def _snapshot(net: torch.nn.Module) -> Snapshot:
    """Weights, requires_grad flags, modes and param-group membership."""
    trainable = any(p.requires_grad for p in net.parameters())  # else the builder refuses
    groups = [[id(p) for p in g["params"]] for g in build_param_groups(net, NNOptimParams())
              ] if trainable else []
    return ({k: v.clone() for k, v in net.state_dict().items()},
            [p.requires_grad for p in net.parameters()], [m.training for m in net.modules()],
            groups)


def _same(net: torch.nn.Module, snap: Snapshot) -> bool:
    state, grads, modes, groups = snap
    now = _snapshot(net)
    return (now[0].keys() == state.keys() and all(torch.equal(now[0][k], state[k]) for k in state)
            and (now[1], now[2], now[3]) == (grads, modes, groups))


def test_logits_equal_the_base_model_on_the_concatenated_embeddings() -> None:
    net = _net()
    tuner = PromptTuner(net, 3)
    ids = torch.randint(0, VOCAB, (2, 5))
    with torch.no_grad():
        prompt = tuner.soft_prompt.unsqueeze(0).expand(2, -1, -1)
        ref, _ = net.forward_embeddings(torch.cat((prompt, net.embed(ids)), dim=1))
        out = tuner(ids)
    assert out.shape == (2, 5, VOCAB)  # the virtual positions are stripped
    torch.testing.assert_close(out, ref[:, 3:], atol=1e-6, rtol=0)


def test_a_prompt_initialized_from_token_ids_is_those_tokens_typed_before_the_input() -> None:
    net = _net(1)
    tuner = PromptTuner(net, 3, init=[4, 7, 11])
    ids = torch.randint(0, VOCAB, (2, 5))
    with torch.no_grad():
        ref = net(torch.cat((torch.tensor([[4, 7, 11]] * 2), ids), dim=1))[:, 3:]
        torch.testing.assert_close(tuner(ids), ref, atol=1e-6, rtol=0)


def test_every_net_parameter_is_frozen_and_only_the_prompt_gets_gradient() -> None:
    net = _net()
    tuner = PromptTuner(net, 2)
    assert not any(p.requires_grad for p in net.parameters())
    assert [n for n, p in tuner.named_parameters() if p.requires_grad] == ["soft_prompt"]
    tuner(torch.randint(0, VOCAB, (1, 4))).sum().backward()
    assert tuner.soft_prompt.grad is not None
    assert all(p.grad is None for p in net.parameters())


def test_the_prompt_takes_the_token_embedding_dtype_and_device() -> None:
    tuner = PromptTuner(_net().double(), 2)
    assert tuner.soft_prompt.dtype == torch.float64
    assert tuner(torch.tensor([[1, 2]])).dtype == torch.float64
    with torch.device("meta"):
        skeleton = _net()
    meta = PromptTuner(skeleton, 2, init="vocab")
    assert meta.soft_prompt.device.type == "meta"
    assert skeleton.embed.weight.device.type == "meta"  # the base is never moved


def test_init_random_vocab_and_ids_follow_hf_peft() -> None:
    net = _net()
    torch.manual_seed(3)
    random = PromptTuner(net, 4).soft_prompt
    torch.manual_seed(3)
    assert torch.equal(random, torch.randn(4, D))  # N(0, 1), HF's RANDOM
    vocab = PromptTuner(net, 5, init="vocab").soft_prompt
    rows = net.embed.weight
    assert all(any(torch.equal(v, r) for r in rows) for v in vocab)  # HF's SAMPLE_VOCAB
    # HF's TEXT: the ids repeat to cover n, then are cut to n
    cycled = PromptTuner(net, 5, init=torch.tensor([2, 9])).soft_prompt
    assert torch.equal(cycled, rows[[2, 9, 2, 9, 2]])
    cut = PromptTuner(net, 2, init=[5, 6, 7]).soft_prompt
    assert torch.equal(cut, rows[[5, 6]])
    assert cut.data_ptr() != rows.data_ptr()  # a copy, not a view of the frozen table


@pytest.mark.parametrize("n, init, error, match", [
    (0, "random", ValueError, "n_virtual_tokens"),
    (True, "random", ValueError, "n_virtual_tokens"),
    (2.0, "random", ValueError, "n_virtual_tokens"),
    (16, "random", ValueError, r"in \[1, 15\]"),  # no room left for a real token
    (2, "text", ValueError, "'random', 'vocab'"),
    (2, [], ValueError, "empty"),
    (2, [1, VOCAB], ValueError, r"init\[1\]"),
    (2, torch.tensor([0.5]), ValueError, "integer tensor"),
    (2, 3, TypeError, "sequence of token ids"),
])
def test_bad_arguments_are_refused_before_anything_changes(
        n: object, init: object, error: type[Exception], match: str) -> None:
    net = _net()
    snap = _snapshot(net)
    with pytest.raises(error, match=match):
        PromptTuner(net, n, init=init)  # type: ignore[arg-type]
    assert _same(net, snap)


def test_the_tuner_copies_the_nets_mode_and_never_sets_the_nets() -> None:
    net = _net()
    net.blocks[0].train()  # a mixed-mode net keeps every child's own mode
    modes = [m.training for m in net.modules()]
    assert PromptTuner(net, 2).training is False
    assert [m.training for m in net.modules()] == modes
    net.train()
    assert PromptTuner(net, 2).training is True


def test_cached_continuation_equals_the_full_forward() -> None:
    tuner = PromptTuner(_net(2), 3)
    ids = torch.randint(0, VOCAB, (1, 6))
    with torch.no_grad():
        head, cache = tuner.forward_with_cache(ids[:, :4])
        tail, cache = tuner.forward_with_cache(ids[:, 4:], cache)
        torch.testing.assert_close(torch.cat((head, tail), 1), tuner(ids), atol=1e-6, rtol=0)
    assert cache[0][0].shape[2] == 3 + 6  # the virtual positions are in the cache


def test_save_writes_only_the_soft_prompt_and_load_restores_it(tmp_path: Path) -> None:
    tuner = PromptTuner(_net(), 3)
    path = save_prompt_weights(tuner, tmp_path / "prompt.pt")
    assert path == tmp_path / "prompt.pt"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prompt.pt"]  # no temp left
    saved = torch.load(path, weights_only=True)
    assert list(saved) == ["soft_prompt"] and torch.equal(saved["soft_prompt"], tuner.soft_prompt)
    fresh = PromptTuner(_net(), 3)
    assert load_prompt_weights(fresh, path) == 1
    ids = torch.randint(0, VOCAB, (2, 4))
    with torch.no_grad():
        assert torch.equal(fresh(ids), tuner(ids))


def test_a_full_checkpoint_loads_only_the_prompt_never_a_frozen_base_tensor() -> None:
    tuner = PromptTuner(_net(), 3)
    full = {k: v + 1 for k, v in copy.deepcopy(tuner).state_dict().items()}
    assert "net.embed.weight" in full
    base = _snapshot(tuner.net)
    assert load_prompt_weights(tuner, full) == 1
    assert torch.equal(tuner.soft_prompt, full["soft_prompt"])
    assert _same(tuner.net, base)


def test_refused_loads_change_nothing() -> None:
    tuner = PromptTuner(_net(), 3)
    before = tuner.soft_prompt.detach().clone()
    with pytest.raises(RuntimeError, match="size mismatch"):  # torch's own error
        load_prompt_weights(tuner, {"soft_prompt": torch.zeros(4, D)})
    with pytest.raises(ValueError, match="no soft_prompt"):
        load_prompt_weights(tuner, {"net.embed.weight": torch.zeros(VOCAB, D)})
    with pytest.raises(TypeError, match="must be a tensor"):
        load_prompt_weights(tuner, {"soft_prompt": [[0.0] * D] * 3})
    with pytest.raises(TypeError, match="path or a state dict"):
        load_prompt_weights(tuner, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a PromptTuner"):
        load_prompt_weights(tuner.net, {})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="takes a PromptTuner"):
        save_prompt_weights(tuner.net, "x.pt")  # type: ignore[arg-type]
    assert torch.equal(tuner.soft_prompt, before)


def test_loading_keeps_the_destination_placement_and_modes(tmp_path: Path) -> None:
    source = PromptTuner(_net(), 2)
    path = save_prompt_weights(source, tmp_path / "p.pt")
    net = _net().double()
    net.train()
    dest = PromptTuner(net, 2)
    dest.eval()
    net.blocks[1].train()
    modes = [m.training for m in dest.modules()]
    load_prompt_weights(dest, path)
    assert dest.soft_prompt.dtype == torch.float64
    torch.testing.assert_close(dest.soft_prompt, source.soft_prompt.double())
    assert [m.training for m in dest.modules()] == modes
    # modes are runtime state: nothing about them is in a state dict or a file
    assert all(isinstance(v, torch.Tensor) for v in dest.state_dict().values())
