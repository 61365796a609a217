"""PromptTuner and PrefixTuner against Hugging Face PEFT on the same Llama weights.

A transformers Llama loads into a TransformerNN (nnx.lm.hf); PEFT's tuner and
ours are given the same learned tensors. Test-only dependencies: skipped where
peft / transformers are not installed (the à-la-carte check).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("nnx.lm")
peft = pytest.importorskip("peft")
transformers = pytest.importorskip("transformers")

from nnx.lm.hf import load_llama  # noqa: E402
from nnx.peft import PrefixTuner, PromptTuner  # noqa: E402

VOCAB, D, H, LAYERS = 41, 16, 2, 2
HD = D // H


def _pair(tmp_path: Path) -> tuple[torch.nn.Module, torch.nn.Module]:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=VOCAB, hidden_size=D, intermediate_size=48, num_hidden_layers=LAYERS,
        num_attention_heads=H, num_key_value_heads=H, max_position_embeddings=32,
        tie_word_embeddings=True, rope_theta=500.0, rms_norm_eps=1e-6, initializer_range=0.2)
    model = transformers.LlamaForCausalLM(config).eval()
    model.save_pretrained(tmp_path / "llama")
    return model, load_llama(tmp_path / "llama").eval()


def test_prompt_tuning_logits_equal_hf_peft(tmp_path: Path) -> None:
    model, net = _pair(tmp_path)
    tuner = PromptTuner(net, 4)
    theirs = peft.get_peft_model(model, peft.PromptTuningConfig(
        task_type="CAUSAL_LM", num_virtual_tokens=4)).eval()
    with torch.no_grad():
        theirs.prompt_encoder["default"].embedding.weight.copy_(tuner.soft_prompt)
        ids = torch.randint(0, VOCAB, (2, 7))
        hf = theirs(input_ids=ids).logits
        assert hf.shape == (2, 4 + 7, VOCAB)  # PEFT keeps the virtual positions; we strip
        torch.testing.assert_close(tuner(ids), hf[:, 4:], atol=1e-5, rtol=0)


def test_prefix_tuning_equals_hf_peft_once_the_token_positions_agree(
        tmp_path: Path) -> None:
    model, net = _pair(tmp_path)
    tuner = PrefixTuner(net, 3)
    theirs = peft.get_peft_model(model, peft.PrefixTuningConfig(
        task_type="CAUSAL_LM", num_virtual_tokens=3)).eval()
    with torch.no_grad():
        # PEFT's layout: (n, layers * 2 * d_model), layer i's keys then its values,
        # each (n, heads, head_dim) per slot.
        table = torch.stack([torch.stack((k, v)) for k, v in
                             zip(tuner.prefix_keys, tuner.prefix_values, strict=True)])
        # (layers, 2, heads, n, head_dim) -> (n, layers, 2, heads, head_dim)
        theirs.prompt_encoder["default"].embedding.weight.copy_(
            table.permute(3, 0, 1, 2, 4).reshape(3, -1))
        ids = torch.randint(0, VOCAB, (2, 6))
        ours = tuner(ids)
        # Our convention: the tokens keep positions 0..T-1. PEFT puts them at n..n+T-1,
        # after the prefix (it adds n to any position_ids given), so ask for -n..T-1-n.
        hf = theirs(input_ids=ids, position_ids=torch.arange(6).expand(2, -1) - 3).logits
        torch.testing.assert_close(ours, hf, atol=1e-5, rtol=0)
        shifted = theirs(input_ids=ids).logits
    assert not torch.allclose(ours, shifted, atol=1e-4)  # the documented difference
