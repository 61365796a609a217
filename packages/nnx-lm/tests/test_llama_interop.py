"""Hugging Face Llama checkpoints ↔ TransformerNN (issue 16): nothing is downloaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers is a dev-only dependency")

from nnx.lm.hf import llama_params, load_llama, save_llama  # noqa: E402
from nnx.lm.net import TransformerNN  # noqa: E402

VOCAB = 97


def _llama(tmp_path: Path, *, tied: bool = True) -> tuple[object, Path]:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=96, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=128,
        tie_word_embeddings=tied, rope_theta=500.0, rms_norm_eps=1e-6,
        initializer_range=0.2)  # wide weights: a near-uniform model ties its argmax
    model = transformers.LlamaForCausalLM(config).eval()
    directory = tmp_path / "llama"
    model.save_pretrained(directory)
    return model, directory


def _greedy(net: TransformerNN, prompt: torch.Tensor, new: int) -> torch.Tensor:
    with torch.no_grad():
        logits, cache = net.forward_with_cache(prompt)
        ids = prompt
        for _ in range(new):
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            ids = torch.cat((ids, nxt), dim=1)
            logits, cache = net.forward_with_cache(nxt, cache)
    return ids


@pytest.mark.parametrize("tied", [True, False])
def test_a_llama_checkpoint_loads_with_equal_logits(tmp_path: Path, tied: bool) -> None:
    model, directory = _llama(tmp_path, tied=tied)
    assert (directory / "model.safetensors").is_file()
    net = load_llama(directory).eval()
    assert net.params.tie_embeddings is tied
    assert net.params.rope_base == 500.0 and net.params.norm_eps == 1e-6
    ids = torch.randint(0, VOCAB, (2, 20))
    with torch.no_grad():
        ours = net(ids)
        theirs = model(ids).logits  # type: ignore[operator]
    assert torch.allclose(ours, theirs, atol=1e-5, rtol=0), float((ours - theirs).abs().max())


def test_greedy_continuation_matches_transformers_generate(tmp_path: Path) -> None:
    model, directory = _llama(tmp_path)
    net = load_llama(directory).eval()
    prompt = torch.tensor([[5, 17, 42, 8, 3]])
    with torch.no_grad():
        expected = model.generate(  # type: ignore[attr-defined]
            prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
            max_new_tokens=40, min_new_tokens=40, pad_token_id=0)
    ours = _greedy(net, prompt, 40)
    assert torch.equal(ours, expected)
    assert len(set(ours[0, 5:].tolist())) > 1


def test_an_exported_directory_loads_back_into_transformers(tmp_path: Path) -> None:
    _, directory = _llama(tmp_path)
    net = load_llama(directory).eval()
    out = save_llama(net, tmp_path / "export")
    assert json.loads((out / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    back = transformers.LlamaForCausalLM.from_pretrained(out).eval()
    ids = torch.randint(0, VOCAB, (2, 16))
    with torch.no_grad():
        assert torch.allclose(back(ids).logits, net(ids), atol=1e-5, rtol=0)
    again = load_llama(out)
    assert again.params == net.params
    assert all(torch.equal(a, b) for a, b in
               zip(again.state_dict().values(), net.state_dict().values(), strict=True))


def test_an_untied_transformer_exports_its_head(tmp_path: Path) -> None:
    _, directory = _llama(tmp_path, tied=False)
    net = load_llama(directory).eval()
    back = transformers.LlamaForCausalLM.from_pretrained(save_llama(net, tmp_path / "x")).eval()
    ids = torch.randint(0, VOCAB, (1, 12))
    with torch.no_grad():
        assert torch.allclose(back(ids).logits, net(ids), atol=1e-5, rtol=0)


def test_unsupported_llama_variants_are_refused() -> None:
    base = {"vocab_size": 8, "hidden_size": 16, "intermediate_size": 32,
            "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 8}
    assert llama_params(base).ffn_mult == 2
    assert llama_params({**base, "intermediate_size": 40}).ffn_dim == 40
    with pytest.raises(ValueError, match="grouped-query"):
        llama_params({**base, "num_key_value_heads": 1})
    with pytest.raises(ValueError, match="rope_type"):
        llama_params({**base, "rope_parameters": {"rope_type": "llama3", "rope_theta": 1.0}})
    with pytest.raises(ValueError, match="attention_bias"):
        llama_params({**base, "attention_bias": True})
