"""write_gguf(arch="llama"): exactly the tensor names and shapes llama.cpp's converter
writes for the same Llama, derived from a locally built transformers LlamaForCausalLM and
gguf's own tensor-name map (no download), with q/k in llama.cpp's pair layout."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from _interop_tiny import tiny_net, tiny_tokenizer
from safetensors.torch import load_file

from nnx.interop import write_gguf
from nnx.lm.hf import save_llama

transformers = pytest.importorskip("transformers")


def _converter_view(net: torch.nn.Module, tmp_path: Path) -> dict[str, torch.Tensor]:
    """The tensors llama.cpp's converter would write for ``net`` as a Hugging Face Llama:
    what ``save_pretrained`` stores, renamed by gguf's map, q/k permuted per head."""
    save_llama(net, tmp_path / "src")
    hf = transformers.LlamaForCausalLM.from_pretrained(tmp_path / "src")
    hf.save_pretrained(tmp_path / "hf")
    stored = load_file(tmp_path / "hf" / "model.safetensors")
    cfg = hf.config
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, cfg.num_hidden_layers)
    out = {}
    for hf_name, tensor in stored.items():
        name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        assert name is not None, hf_name
        if hf_name.endswith(("q_proj.weight", "k_proj.weight")):
            tensor = _pairs_adjacent(tensor, cfg.num_attention_heads)
        out[name] = tensor
    return out


def _pairs_adjacent(w: torch.Tensor, heads: int) -> torch.Tensor:
    # By index (not by reshape, as the exporter does): in each head, output row 2i is
    # input row i and row 2i+1 is input row i + head_dim/2.
    hd = w.shape[0] // heads
    order = [h * hd + (j // 2) + (j % 2) * (hd // 2) for h in range(heads) for j in range(hd)]
    return w[order]


@pytest.mark.parametrize("tie", [True, False])
def test_llama_export_has_the_converters_names_shapes_and_values(tmp_path: Path,
                                                                  tie: bool) -> None:
    net = tiny_net(tie=tie)
    expected = _converter_view(net, tmp_path)
    write_gguf(net, tmp_path / "llama.gguf", arch="llama", tokenizer=tiny_tokenizer())
    reader = gguf.GGUFReader(tmp_path / "llama.gguf")
    got = {t.name: t for t in reader.tensors}
    assert set(got) == set(expected)
    assert ("output.weight" in got) is (not tie)
    for name, tensor in expected.items():
        assert [int(n) for n in got[name].shape] == list(reversed(tensor.shape)), name
        assert np.asarray(got[name].data).tobytes() == tensor.numpy().tobytes(), name
    fields = reader.fields
    assert fields["general.architecture"].contents() == "llama"
    p = net.params
    for key, value in [("llama.block_count", p.n_layers), ("llama.embedding_length", p.d_model),
                       ("llama.attention.head_count", p.n_heads),
                       ("llama.attention.head_count_kv", p.n_heads),
                       ("llama.feed_forward_length", p.ffn_width),
                       ("llama.context_length", p.max_seq_len),
                       ("llama.rope.dimension_count", p.head_dim)]:
        assert fields[key].contents() == value, key
    assert fields["llama.rope.freq_base"].contents() == pytest.approx(p.rope_base)


def _rope_adjacent(x: torch.Tensor, base: float) -> torch.Tensor:
    """llama.cpp's rotation: channels (2i, 2i+1) by position × base^(-2i/dim)."""
    t, d = x.shape[-2:]
    angle = torch.arange(t)[:, None] * base ** (-torch.arange(0, d, 2) / d)
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * angle.cos() - b * angle.sin()
    out[..., 1::2] = a * angle.sin() + b * angle.cos()
    return out


def test_the_llama_layout_gives_the_same_attention_scores_under_llama_cpps_rope(
        tmp_path: Path) -> None:
    net = tiny_net()
    write_gguf(net, tmp_path / "llama.gguf", arch="llama")
    got = {t.name: torch.from_numpy(np.array(t.data)) for t in
           gguf.GGUFReader(tmp_path / "llama.gguf").tensors}
    attn, p = net.blocks[0].attn, net.params
    x = torch.randn(5, p.d_model)
    q, k, _ = attn.qkv(x).detach().split(p.d_model, dim=-1)
    qg, kg = x @ got["blk.0.attn_q.weight"].T, x @ got["blk.0.attn_k.weight"].T
    for h in range(p.n_heads):
        cut = slice(h * p.head_dim, (h + 1) * p.head_dim)
        ours = attn.rope(q[:, cut]) @ attn.rope(k[:, cut]).T
        theirs = _rope_adjacent(qg[:, cut], p.rope_base) @ _rope_adjacent(kg[:, cut],
                                                                           p.rope_base).T
        torch.testing.assert_close(theirs, ours, rtol=1e-4, atol=1e-5)
