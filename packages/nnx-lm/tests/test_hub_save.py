"""GenerativeNNModel through core's Hub save (docs/hub.md): rebuilt as itself, tied
embeddings carried, the tokenizer passed again (a Hub save does not carry it)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from nnx import Devices, GenerativeNNModel, Nets, NNModelParams, NNTransformerParams
from nnx.lm.tokenizer import NNTokenizerParams

TEXT = "the quick brown fox jumps over the lazy dog. " * 8


def test_a_generative_model_round_trips_through_save_pretrained(tmp_path: Path) -> None:
    tok = NNTokenizerParams.train(TEXT, vocab_size=280)
    shape = NNTransformerParams(vocab_size=280, d_model=16, n_heads=2, n_layers=1,
                                max_seq_len=64)
    assert shape.tie_embeddings  # the tied tensors are stored once each, as safetensors needs
    torch.manual_seed(0)
    model = GenerativeNNModel(net_params=shape, tokenizer=tok,
                              params=NNModelParams(net=Nets.TRANSFORMER, device=Devices.CPU))
    with torch.no_grad():
        for p in model.net.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(tmp_path / "lm")
    assert {p.name for p in (tmp_path / "lm").iterdir()} == {"config.json", "model.safetensors",
                                                            "README.md"}
    config = json.loads((tmp_path / "lm" / "config.json").read_text())
    assert config["model_class"] == "nnx.lm.generative.GenerativeNNModel"  # information only

    loaded = GenerativeNNModel.from_pretrained(tmp_path / "lm", tokenizer=tok)
    assert type(loaded) is GenerativeNNModel and loaded.tokenizer is tok
    expected = model.generate("the quick", max_new_tokens=12, temperature=0)
    assert loaded.generate("the quick", max_new_tokens=12, temperature=0) == expected
    untokenized = GenerativeNNModel.from_pretrained(tmp_path / "lm")
    assert untokenized.tokenizer is None  # token ids in, token ids out
