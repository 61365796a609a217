"""write_gguf(arch="nnx_transformer"): the file reads back with gguf's own reader, every
tensor bit for bit and every key present; refusals come before anything is written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from _interop_tiny import tiny_net, tiny_tokenizer

from nnx.interop import (
    ExportExistsError,
    NotATransformerError,
    UnsupportedExportError,
    write_gguf,
)
from nnx.interop.layout import nnx_tensors
from nnx.interop.metadata import HYPER_PARAMETERS
from nnx.lm import NNTransformerParams


def _torch_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous()
    raw = t.view(torch.int16) if t.dtype == torch.bfloat16 else t
    return bytes(raw.numpy().tobytes())


def _read(path: Path) -> gguf.GGUFReader:
    return gguf.GGUFReader(path)


def _expected_nnx(net: torch.nn.Module) -> dict[str, torch.Tensor]:
    # Independent of the exporter: the state dict with qkv cut in three by hand.
    out: dict[str, torch.Tensor] = {}
    for name, t in net.state_dict().items():
        if name.endswith("attn.qkv.weight"):
            d = t.shape[1]
            stem = name.removesuffix("qkv.weight")
            out[stem + "q.weight"], out[stem + "k.weight"], out[stem + "v.weight"] = (
                t[:d], t[d:2 * d], t[2 * d:])
        else:
            out[name] = t
    return out


@pytest.mark.parametrize(("tie", "dtype"), [(True, torch.float32), (False, torch.float16),
                                            (True, torch.bfloat16)])
def test_every_tensor_reads_back_bit_exact_in_the_readers_reversed_shape(
        tmp_path: Path, tie: bool, dtype: torch.dtype) -> None:
    net = tiny_net(tie=tie, dtype=dtype)
    out = tmp_path / "m.gguf"
    report = write_gguf(net, out)
    reader = _read(out)
    expected = _expected_nnx(net)
    got = {t.name: t for t in reader.tensors}
    assert list(got) == list(expected)  # names and order
    assert report.tensors == {k: tuple(v.shape) for k, v in expected.items()}
    ggml = {torch.float32: gguf.GGMLQuantizationType.F32,
            torch.float16: gguf.GGMLQuantizationType.F16,
            torch.bfloat16: gguf.GGMLQuantizationType.BF16}[dtype]
    for name, tensor in expected.items():
        read = got[name]
        # GGUF lists dimensions innermost first: the reader's shape is PyTorch's reversed.
        assert [int(n) for n in read.shape] == list(reversed(tensor.shape)), name
        assert read.tensor_type == ggml
        assert np.asarray(read.data).tobytes() == _torch_bytes(tensor), name
    assert ("lm_head.weight" in got) is (not tie)
    assert not any(n.endswith("qkv.weight") for n in got)


def test_every_metadata_key_is_present_with_its_value(tmp_path: Path) -> None:
    net, tok = tiny_net(), tiny_tokenizer()
    report = write_gguf(net, tmp_path / "m.gguf", tokenizer=tok, name="tiny")
    fields = _read(tmp_path / "m.gguf").fields
    assert set(report.metadata_keys) <= set(fields)
    value = {k: fields[k].contents() for k in report.metadata_keys}
    p = net.params
    assert value["general.architecture"] == "nnx_transformer"
    assert value["general.name"] == "tiny"
    for field in HYPER_PARAMETERS:
        if getattr(p, field) is not None:
            assert value[f"nnx.params.{field}"] == getattr(p, field), field
    assert value["nnx_transformer.block_count"] == p.n_layers
    assert value["nnx_transformer.feed_forward_length"] == 48
    assert value["nnx_transformer.rope.dimension_count"] == p.head_dim
    assert value["nnx_transformer.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-6)
    # The tokenizer: its whole JSON, and llama.cpp's token list padded to the vocabulary.
    assert json.loads(value["tokenizer.huggingface.json"]) == json.loads(tok.tokenizer.to_str())
    tokens = value["tokenizer.ggml.tokens"]
    assert len(tokens) == p.vocab_size == len(value["tokenizer.ggml.token_type"])
    assert tokens[tok.eos_id] == "<eos>" and value["tokenizer.ggml.eos_token_id"] == tok.eos_id
    assert tokens[-1] == f"[PAD{p.vocab_size - 1}]"
    assert value["tokenizer.ggml.model"] == "gpt2" and value["tokenizer.ggml.merges"]


def test_the_hyper_parameters_rebuild_the_same_params(tmp_path: Path) -> None:
    net = tiny_net(tie=False)
    write_gguf(net, tmp_path / "m.gguf")
    fields = _read(tmp_path / "m.gguf").fields
    prefix = "nnx.params."
    saved = {k[len(prefix):]: f.contents() for k, f in fields.items() if k.startswith(prefix)}
    assert NNTransformerParams(**saved) == net.params


def test_a_generative_model_brings_its_own_tokenizer(tmp_path: Path) -> None:
    from nnx import Nets, NNModelParams
    from nnx.lm import GenerativeNNModel, NNTransformerParams

    tok = tiny_tokenizer()
    model = GenerativeNNModel(
        net_params=NNTransformerParams(vocab_size=300, d_model=16, n_heads=2, n_layers=1,
                                       max_seq_len=8),
        params=NNModelParams(net=Nets.TRANSFORMER), tokenizer=tok)
    report = write_gguf(model, tmp_path / "g.gguf")
    assert report.tokenizer_embedded
    assert "tokenizer.ggml.tokens" in _read(tmp_path / "g.gguf").fields


def _only(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir())


def test_refusals_come_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "sub" / "m.gguf"
    with pytest.raises(NotATransformerError):
        write_gguf(torch.nn.Linear(2, 2), out)
    with pytest.raises(UnsupportedExportError, match="arch"):
        write_gguf(tiny_net(), out, arch="gpt2")
    with pytest.raises(UnsupportedExportError, match="float64"):
        write_gguf(tiny_net(dtype=torch.float64), out)
    with pytest.raises(UnsupportedExportError, match="vocabulary"):
        write_gguf(tiny_net(vocab=270), out, tokenizer=tiny_tokenizer(280))
    wrapped = tiny_net()  # as an adapter wrapping the fused projection would leave it
    wrapped.blocks[0].attn.qkv = torch.nn.Sequential(wrapped.blocks[0].attn.qkv)
    with pytest.raises(UnsupportedExportError, match="not a plain TransformerNN"):
        write_gguf(wrapped, out)
    assert _only(tmp_path) == []  # not even the parent directory


def test_an_existing_path_is_refused_unless_overwrite(tmp_path: Path) -> None:
    out = tmp_path / "m.gguf"
    out.write_bytes(b"keep")
    with pytest.raises(ExportExistsError, match="overwrite=True"):
        write_gguf(tiny_net(), out)
    assert out.read_bytes() == b"keep"
    with pytest.raises(ExportExistsError, match="directory"):
        write_gguf(tiny_net(), tmp_path, overwrite=True)
    write_gguf(tiny_net(seed=1), out, overwrite=True)
    assert _read(out).fields["general.architecture"].contents() == "nnx_transformer"
    assert _only(tmp_path) == ["m.gguf"]  # the atomic writer left no temp behind


def test_the_exporter_splits_qkv_in_q_k_v_order() -> None:
    net = tiny_net()
    split = nnx_tensors(net)
    q, k, v = (split[f"blocks.0.attn.{p}.weight"] for p in "qkv")
    x = torch.randn(1, 3, 32)
    fused = net.blocks[0].attn.qkv(x)
    assert torch.equal(torch.cat((x @ q.T, x @ k.T, x @ v.T), dim=-1), fused)


def test_without_nnx_lm_the_install_hint_names_it(tmp_path: Path) -> None:
    # A fresh process (never fork the test process) where nnx.lm cannot be imported.
    code = ("import sys; sys.modules['nnx.lm'] = None\n"
            "from nnx.interop import write_gguf\n"
            "try:\n    write_gguf(object(), 'x.gguf')\n"
            "except ImportError as exc:\n    print(type(exc).__name__, exc)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "MissingDistributionError" in proc.stdout and "pip install nnx-lm" in proc.stdout
    assert not (tmp_path / "x.gguf").exists()
