"""Writing a GGUF file once, in place, through nnx-core's one atomic writer.

``atomic_write`` creates a temporary file beside the destination and renames it over the
destination only once the export is complete and flushed: a reader of ``path`` sees the
previous file or the whole export, never a torn one, and a failed export leaves neither a
file nor a temporary behind.

gguf-py's ``GGUFWriter`` takes a path, never an open file (it opens its output itself,
``open(path, "wb")``, so that it can shard), so it is handed the temporary's own name:
the file is opened a second time and gguf writes straight into it. Both descriptors
reach one inode, so the writer's ``close`` (which flushes Python's buffer) followed by
``atomic_write``'s fsync of its own descriptor puts every byte on disk before the rename
(fsync flushes the file, whichever descriptor wrote it). Setting GGUFWriter's internal
``fout`` / ``state`` instead would rely on gguf-py's private state machine.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

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


def _fill(writer: gguf.GGUFWriter, entries: Sequence[Entry],
          tensors: Mapping[str, torch.Tensor]) -> None:
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


def write_document(path: Path, arch: str, entries: Sequence[Entry],
                   tensors: Mapping[str, torch.Tensor]) -> Path:
    """Write the GGUF file ``path`` (metadata ``entries``, ``tensors`` in order); returns
    the resolved destination."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # atomic_write's own temp naming (".<name>.<8 hex>", beside the resolved destination),
    # chosen here so that GGUFWriter can be given the name.
    temp = f".{path.name}.{secrets.token_hex(4)}"
    staged = Path(os.path.realpath(path)).parent / temp

    def write(out: IO[bytes]) -> None:
        # The name must reach the file atomic_write opened, never a second file.
        if not os.path.samestat(os.fstat(out.fileno()), os.stat(staged)):
            raise RuntimeError(f"write_gguf: {staged} is not the atomic writer's temp")
        writer = gguf.GGUFWriter(staged, arch)
        try:
            _fill(writer, entries, tensors)
        finally:
            writer.close()

    return atomic_write(path, write, temp=temp)
