"""nnx-interop: exchange formats (spec §15, §16): NNx models as GGUF files and Ollama bundles.

``write_gguf(model, path, arch="nnx_transformer" | "llama")`` writes an nnx-lm
TransformerNN with its tokenizer and hyper-parameters; ``export_ollama_modelfile`` writes
the Modelfile beside it. See docs/gguf.md.
"""

from nnx.interop.errors import ExportExistsError, NotATransformerError, UnsupportedExportError
from nnx.interop.gguf_export import write_gguf
from nnx.interop.ollama import export_ollama_modelfile
from nnx.interop.report import GGUFExport, OllamaBundle

__nnx_skeleton__ = {"kind": "tool", "verb": "gguf_export"}

__all__ = [
    "ExportExistsError",
    "GGUFExport",
    "NotATransformerError",
    "OllamaBundle",
    "UnsupportedExportError",
    "export_ollama_modelfile",
    "write_gguf",
]
