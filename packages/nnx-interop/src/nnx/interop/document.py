"""Writing a GGUF file: gguf-py's GGUFWriter, then nnx-core's one atomic writer.

GGUFWriter opens its destination by name, so it writes into a private temporary
directory and the finished file is streamed to ``path`` through ``atomic_write``: a reader
of ``path`` sees the previous file or the complete export, never a torn one, and a failed
export leaves nothing behind.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import gguf
import numpy as np
import torch

from nnx.extend import atomic_write
from nnx.interop.metadata import Entry

__all__ = ["gguf_array", "write_document"]


def gguf_array(tensor: torch.Tensor) -> tuple[np.ndarray, gguf.GGMLQuantizationType | None]:
    """``tensor``'s bytes as numpy, with the GGML type numpy cannot name (bfloat16)."""
    t = tensor.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy(), gguf.GGMLQuantizationType.BF16
    return t.numpy(), None


def write_document(path: Path, arch: str, entries: Sequence[Entry],
                   tensors: Mapping[str, torch.Tensor]) -> Path:
    """Write the GGUF file ``path`` (metadata ``entries``, ``tensors`` in order); returns
    the resolved destination."""
    with tempfile.TemporaryDirectory(prefix="nnx-gguf-") as scratch:
        staged = Path(scratch) / path.name
        writer = gguf.GGUFWriter(staged, arch)
        try:
            for key, value, kind in entries:
                if isinstance(value, list):
                    writer.add_key_value(key, value, gguf.GGUFValueType.ARRAY, sub_type=kind)
                else:
                    writer.add_key_value(key, value, kind)
            for name, tensor in tensors.items():
                array, raw = gguf_array(tensor)
                writer.add_tensor(name, array, raw_dtype=raw)
            writer.write_header_to_file()
            writer.write_kv_data_to_file()
            writer.write_tensors_to_file()
        finally:
            writer.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        with staged.open("rb") as source:
            return atomic_write(path, lambda out: shutil.copyfileobj(source, out))
