"""nnx-embeddings: domain text embedders and their FAISS export (spec §16, §24).

* :func:`train_contrastive` trains an embedder (token ids → embeddings) on
  ``(anchor, positive)`` text pairs with nnx-paradigms' NT-Xent, as an ordinary NNx run;
  :func:`text_contrastive_train_step_factory` is its ``train_step_fn`` for a loader of
  your own;
* :func:`embed_texts` embeds texts in batches, without autograd, L2-normalised by
  default, restoring every submodule's mode (spec §13.2);
* :func:`export_to_faiss` writes a Flat or HNSW FAISS index of a corpus and returns its
  path; the ``.ids.json`` / ``.safetensors`` sidecars map FAISS positions to the caller's
  ids (:func:`read_faiss_ids`). See docs/embeddings.md.
"""

from nnx.embeddings.embed import embed_texts
from nnx.embeddings.faiss_export import export_to_faiss, read_faiss_ids, sidecar_paths
from nnx.embeddings.step import text_contrastive_train_step_factory
from nnx.embeddings.training import train_contrastive

__nnx_skeleton__ = {"kind": "training"}

__all__ = [
    "embed_texts",
    "export_to_faiss",
    "read_faiss_ids",
    "sidecar_paths",
    "text_contrastive_train_step_factory",
    "train_contrastive",
]
