"""Export an NNx TransformerNN to GGUF with nnx-interop (spec §15), offline.

A tiny byte-level BPE tokenizer and a GenerativeNNModel built on it are written twice:

* ``arch="nnx_transformer"``: NNx's own tensor names (the fused QKV split into q, k, v),
  every hyper-parameter and the tokenizer as metadata. Stock llama.cpp, Ollama and LM
  Studio do not run this architecture: the file is for inspection or an NNx-patched
  runtime;
* ``arch="llama"``: llama.cpp's Llama names and q/k layout, the file a stock
  llama.cpp-family runtime loads.

Each file is read back with gguf's own reader and every tensor compared bit for bit; an
Ollama Modelfile is written beside the Llama file (``ollama create tiny -f Modelfile``
would import it; this script runs no Ollama).

    uv run python examples/gguf_export.py
"""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np

from nnx import Nets, NNModelParams
from nnx.interop import export_ollama_modelfile, write_gguf
from nnx.lm import GenerativeNNModel, NNTokenizerParams, NNTransformerParams

TEXT = "the cat sat on the mat and the dog sat on the log. " * 20
OUT = Path("gguf_export")

tokenizer = NNTokenizerParams.train(TEXT, vocab_size=300, min_frequency=1)
model = GenerativeNNModel(
    net_params=NNTransformerParams(vocab_size=320, d_model=64, n_heads=4, n_layers=2,
                                   max_seq_len=128),
    params=NNModelParams(net=Nets.TRANSFORMER), tokenizer=tokenizer)

for arch in ("nnx_transformer", "llama"):
    # overwrite=True: a second run replaces the files (without it an existing file is refused).
    report = write_gguf(model, OUT / f"tiny-{arch}.gguf", arch=arch, overwrite=True)
    print(report.text())
    reader = gguf.GGUFReader(report.path)
    assert {t.name for t in reader.tensors} == set(report.tensors)
    for tensor in reader.tensors:
        # The reader lists a shape innermost first: PyTorch's shape reversed.
        assert tuple(reversed([int(n) for n in tensor.shape])) == report.tensors[tensor.name]
    assert set(report.metadata_keys) <= set(reader.fields)
    names = sorted(report.tensors)[:4]
    print(f"  {len(reader.tensors)} tensors read back, e.g. {', '.join(names)}")

# The untouched embedding comes back bit for bit from the Llama file.
embedding = next(t for t in gguf.GGUFReader(OUT / "tiny-llama.gguf").tensors
                 if t.name == "token_embd.weight")
assert np.array_equal(np.asarray(embedding.data), model.net.embed.weight.detach().numpy())

bundle = export_ollama_modelfile(OUT / "tiny-llama.gguf", system="You tell tiny stories.",
                                 parameters={"temperature": 0.8}, overwrite=True)
print(bundle.text())
print(bundle.modelfile.read_text())
