"""The llama.cpp keys a stock loader reads besides the shapes: ``general.file_type`` (the
tensors' precision in llama.cpp's numbering) and ``tokenizer.ggml.pre`` (how text is split
before BPE), for both architectures."""

from __future__ import annotations

from pathlib import Path

import gguf
import pytest
import torch
from _interop_tiny import tiny_net

from nnx.interop import write_gguf

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
