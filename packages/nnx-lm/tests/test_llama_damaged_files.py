"""load_llama on a directory it cannot load (issue 36): a config declaring sizes no net can
have, a weights header whose shape overflows, weights missing or of other shapes. Each is
``nnx.CheckpointReadError`` naming the file and what is wrong on one line (never torch's
or safetensors' raw overflow), nothing is allocated for the net, the RNG streams do not
move and nothing on disk changes."""

from __future__ import annotations

import json
import re
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from nnx import CheckpointReadError
from nnx.lm.hf import load_llama, save_llama
from nnx.lm.net import TransformerNN
from nnx.lm.params import NNTransformerParams


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    net = TransformerNN(NNTransformerParams(vocab_size=31, d_model=16, n_heads=2, n_layers=1,
                                            max_seq_len=16))
    return save_llama(net, tmp_path / "llama")


def _config(**changes: Any) -> Callable[[Path], None]:
    def edit(directory: Path) -> None:
        path = directory / "config.json"
        config = {**json.loads(path.read_text()), **changes}
        path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    return edit


def _weights_declaring(shape: list[int]) -> Callable[[Path], None]:
    def edit(directory: Path) -> None:
        header = json.dumps({"model.norm.weight": {"dtype": "F32", "shape": shape,
                                                   "data_offsets": [0, 64]}}).encode()
        (directory / "model.safetensors").write_bytes(
            struct.pack("<Q", len(header)) + header + bytes(64))
    return edit


CASES = [
    ("vocab 2**62", _config(vocab_size=2**62), "config.json",
     r"the net its configuration declares cannot be built \(RuntimeError: .*overflow"),
    ("positions 2**62", _config(max_position_embeddings=2**62), "config.json",
     r"the net its configuration declares cannot be built \(RuntimeError: .*overflow"),
    ("ffn 2**62", _config(intermediate_size=2**62), "config.json",
     r"the net its configuration declares cannot be built .*; nothing was loaded$"),
    ("vocab 2**20", _config(vocab_size=2**20), "config.json",
     r"the weights do not fit the net it declares \(saved vs declared: embed\.weight "
     r"\(31, 16\) vs \(1048576, 16\)"),
    ("a layer more", _config(num_hidden_layers=2), "",
     r"its config calls for model\.layers\.1\.self_attn\.q_proj\.weight, which the weights "
     r"lack"),
    ("no heads", _config(num_attention_heads=None), "config.json",
     r"it lacks the field 'num_attention_heads'"),
    ("header shape 2**62", _weights_declaring([2**62, 2**62]), "model.safetensors",
     r"SafetensorError: .*overflow"),
]


@pytest.mark.parametrize(("edit", "file", "reason"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_directory_that_cannot_load_is_named_with_what_is_wrong(
        directory: Path, edit: Callable[[Path], None], file: str, reason: str) -> None:
    edit(directory)
    files = {p.name: p.read_bytes() for p in directory.iterdir()}
    rng = torch.get_rng_state()
    named = (directory / file if file else directory).as_posix()
    with pytest.raises(CheckpointReadError,
                       match=rf"^cannot read checkpoint {re.escape(named)}: {reason}") as info:
        load_llama(directory)
    assert "\n" not in str(info.value)
    assert torch.equal(torch.get_rng_state(), rng)  # no net was built for real
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == files


def test_a_healthy_directory_still_loads(directory: Path) -> None:
    net = load_llama(directory)
    assert net.params.vocab_size == 31 and net.embed.weight.device.type == "cpu"
