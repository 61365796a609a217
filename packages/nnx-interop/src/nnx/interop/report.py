"""What an export wrote: the result type of write_gguf and export_ollama_modelfile."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["GGUFExport", "OllamaBundle"]


@dataclass(frozen=True)
class GGUFExport:
    """A written GGUF file: where, which architecture, its tensor names (with their
    PyTorch shapes, row-major; a GGUF reader lists them reversed) and metadata keys."""

    path: Path
    arch: str
    tensors: dict[str, tuple[int, ...]]
    metadata_keys: tuple[str, ...]
    tokenizer_embedded: bool

    def text(self) -> str:
        tok = "with its tokenizer" if self.tokenizer_embedded else "without a tokenizer"
        return (f"{self.path}: GGUF, arch {self.arch}, {len(self.tensors)} tensors, "
                f"{len(self.metadata_keys)} metadata keys, {tok}")

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "arch": self.arch,
                "tensors": {k: list(v) for k, v in self.tensors.items()},
                "metadata_keys": list(self.metadata_keys),
                "tokenizer_embedded": self.tokenizer_embedded}


@dataclass(frozen=True)
class OllamaBundle:
    """The Modelfile written beside a GGUF file, and the GGUF file it names."""

    modelfile: Path
    gguf: Path

    def text(self) -> str:
        return f"{self.modelfile}: Ollama Modelfile FROM {self.gguf.name}"
