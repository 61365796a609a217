"""The llama.cpp keys a stock loader reads besides the shapes: ``general.file_type`` (the
tensors' precision in llama.cpp's numbering) and ``tokenizer.ggml.pre`` (how text is split
before BPE), for both architectures."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import pytest
import torch
from _interop_tiny import tiny_net, tiny_tokenizer
from tokenizers import Tokenizer, models, pre_tokenizers

from nnx.interop import UnsupportedExportError, write_gguf
from nnx.lm import NNTokenizerParams

ARCHS = ("nnx_transformer", "llama")
_F = gguf.LlamaFileType


def _field(path: Path, key: str) -> object:
    return gguf.GGUFReader(path).fields[key].contents()


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize(("dtype", "expected"), [(torch.float32, _F.ALL_F32),
                                                 (torch.float16, _F.MOSTLY_F16),
                                                 (torch.bfloat16, _F.MOSTLY_BF16)])
def test_the_file_type_names_the_tensors_precision(tmp_path: Path, arch: str,
                                                   dtype: torch.dtype,
                                                   expected: gguf.LlamaFileType) -> None:
    write_gguf(tiny_net(dtype=dtype), tmp_path / "m.gguf", arch=arch)
    assert _field(tmp_path / "m.gguf", gguf.Keys.General.FILE_TYPE) == int(expected)


@pytest.mark.parametrize("arch", ARCHS)
def test_float32_norms_beside_half_matrices_are_mostly_f16(tmp_path: Path, arch: str) -> None:
    # llama.cpp's own F16 files keep the 1-D norm weights in float32: still MOSTLY_F16.
    net = tiny_net(dtype=torch.float16)
    for module in net.modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, torch.nn.Parameter) and weight.dim() == 1:
            module.weight = torch.nn.Parameter(weight.detach().float())
    write_gguf(net, tmp_path / "m.gguf", arch=arch)
    assert _field(tmp_path / "m.gguf", gguf.Keys.General.FILE_TYPE) == int(_F.MOSTLY_F16)


@pytest.mark.parametrize("arch", ARCHS)
def test_a_byte_level_bpe_is_gpt2_with_gpt2s_pre_tokenizer(tmp_path: Path, arch: str) -> None:
    write_gguf(tiny_net(), tmp_path / "m.gguf", arch=arch, tokenizer=tiny_tokenizer())
    fields = gguf.GGUFReader(tmp_path / "m.gguf").fields
    assert fields[gguf.Keys.Tokenizer.MODEL].contents() == "gpt2"
    assert fields[gguf.Keys.Tokenizer.PRE].contents() == "gpt-2"  # llama.cpp's GPT-2 split


def _variant(change: Callable[[dict[str, Any]], None]) -> NNTokenizerParams:
    """The tiny byte-level BPE with its JSON changed by ``change``."""
    spec = json.loads(tiny_tokenizer().tokenizer.to_str())
    change(spec)
    return NNTokenizerParams(tokenizer=Tokenizer.from_str(json.dumps(spec)))


def _word_level() -> NNTokenizerParams:
    tok = Tokenizer(models.WordLevel({"[UNK]": 0, "cat": 1, "<eos>": 2}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<eos>"])
    return NNTokenizerParams(tokenizer=tok)


def _set(part: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda spec: spec.__setitem__(part, value)


REFUSED = {
    "a word-level model": lambda: _word_level(),
    "a prefix space": lambda: _variant(lambda s: s["pre_tokenizer"].update(
        add_prefix_space=True)),
    "no GPT-2 split": lambda: _variant(lambda s: s["pre_tokenizer"].update(use_regex=False)),
    "a Metaspace pre-tokenizer": lambda: _variant(_set("pre_tokenizer", {
        "type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always",
        "split": True})),
    "a normalizer": lambda: _variant(_set("normalizer", {"type": "Lowercase"})),
    "byte fallback": lambda: _variant(lambda s: s["model"].update(byte_fallback=True)),
    "no byte-level decoder": lambda: _variant(_set("decoder", None)),
}


@pytest.mark.parametrize("kind", list(REFUSED))
@pytest.mark.parametrize("arch", ARCHS)
def test_a_tokenizer_llama_cpp_would_split_otherwise_is_refused_before_any_file(
        tmp_path: Path, arch: str, kind: str) -> None:
    tokenizer = REFUSED[kind]()
    with pytest.raises(UnsupportedExportError, match=r"llama\.cpp cannot tokenize"):
        write_gguf(tiny_net(), tmp_path / "sub" / "m.gguf", arch=arch, tokenizer=tokenizer)
    assert list(tmp_path.iterdir()) == []  # not even the parent directory
