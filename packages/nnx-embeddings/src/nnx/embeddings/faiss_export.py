"""``export_to_faiss``: a model's embeddings of a corpus as a FAISS index file (spec §16, §24).

NNx does not manage retrieval indexes: the call writes one index and returns its path,
and the caller maps FAISS positions (row i = ``texts[i]``) to its own document ids.
Two sidecars beside the index make that mapping travel with it:

* ``<index>.ids.json``: the format, index type, metric, dimension, count, whether the
  rows are normalised, the index file's SHA-256, and ``ids`` (position → id; the
  positions themselves when no ids are given);
* ``<index>.safetensors`` (``keep_embeddings=True``): the ``embeddings`` matrix the
  index holds, and the ``ids`` as an int64 tensor when they are integers.

Every argument is checked before the first forward and before any file (FAISS's own
absence first: an ImportError naming ``pip install faiss-cpu``). The three files are
serialised in memory, then each written by core's atomic writer; if a write fails
after the first, every file of the set is removed, so no index is left without its
mapping (nor a mapping without its index, nor one export's index beside another's
mapping).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import save

from nnx.embeddings.embed import embed_texts, embedder_net
from nnx.embeddings.tokens import check_texts, resolve_tokenizer
from nnx.extend import (
    atomic_write_bytes,
    canonical_bytes,
    check_choice,
    check_count,
    load_json,
    sha256_hex,
)

__all__ = ["FORMAT", "INDEX_TYPES", "METRICS", "build_index", "export_to_faiss",
           "read_faiss_ids", "sidecar_paths"]

#: The JSON sidecar's format tag.
FORMAT = "nnx.embeddings.faiss/1"
INDEX_TYPES = ("flat", "hnsw")
#: "inner_product" on normalised rows is cosine similarity; "l2" is Euclidean distance.
METRICS = ("inner_product", "l2")
_WHO = "export_to_faiss"


def _faiss(who: str) -> Any:
    """The ``faiss`` module, or the ImportError naming its install."""
    try:
        import faiss
    except ImportError as exc:
        if getattr(exc, "name", None) not in (None, "faiss"):
            raise  # faiss is there but broken: its own error, not an install hint
        raise ImportError(f"{who} needs FAISS, which is not installed; install it with: "
                          "pip install faiss-cpu") from exc
    return faiss


def sidecar_paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """``(<index>.ids.json, <index>.safetensors)`` beside the index at ``path``."""
    p = Path(path)
    return p.with_name(p.name + ".ids.json"), p.with_name(p.name + ".safetensors")


def _check_ids(ids: Any, count: int) -> list[int] | list[str]:
    if ids is None:
        return list(range(count))
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Sequence):
        raise TypeError(f"{_WHO}: ids must be a sequence of ints or strings; got "
                        f"{type(ids).__name__}")
    values = list(ids)
    if len(values) != count:
        raise ValueError(f"{_WHO}: {len(values)} ids for {count} texts; give one id per text")
    ints = all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values)
    if not ints and not all(isinstance(v, str) for v in values):
        raise TypeError(f"{_WHO}: ids must be all integers or all strings (no bool, no mix)")
    out: list[Any] = [int(v) for v in values] if ints else values
    if ints and any(not -2**63 <= v < 2**63 for v in out):
        raise ValueError(f"{_WHO}: integer ids must fit in int64")
    seen: set[Any] = set()
    for v in out:
        if v in seen:
            raise ValueError(f"{_WHO}: id {v!r} is given twice; ids must be unique")
        seen.add(v)
    return out


def _check_destination(path: Any) -> Path:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{_WHO}: path must be a str or os.PathLike; got {type(path).__name__}")
    p = Path(path)
    if not p.name or p.is_dir():
        raise IsADirectoryError(f"{_WHO}: {p} is a directory; give the index file's path")
    if not p.parent.is_dir():
        raise FileNotFoundError(f"{_WHO}: the directory {p.parent} does not exist")
    for side in sidecar_paths(p):
        if side.is_dir():
            raise IsADirectoryError(f"{_WHO}: the sidecar path {side} is a directory")
    return p


def build_index(faiss: Any, x: np.ndarray, index_type: str, metric: str, *, hnsw_m: int,
                ef_construction: int, ef_search: int) -> Any:
    """A FAISS index holding the rows of ``x`` (float32, C-contiguous) in order."""
    kind = faiss.METRIC_INNER_PRODUCT if metric == "inner_product" else faiss.METRIC_L2
    d = x.shape[1]
    if index_type == "flat":
        index = faiss.IndexFlat(d, kind)
    else:
        index = faiss.IndexHNSWFlat(d, hnsw_m, kind)
        index.hnsw.efConstruction = ef_construction
        # Serialised with the index: a consumer's searches use it unless they set another.
        index.hnsw.efSearch = ef_search
    index.add(x)
    return index


def _write_all(files: list[tuple[Path, bytes]]) -> None:
    """Write each file atomically; once one is written, a later failure removes every
    file of the set, a previous export's too (a mixed set would pair one export's index
    with another's mapping). A failure at the first write leaves a previous set whole."""
    written = False
    try:
        for dest, data in files:
            atomic_write_bytes(dest, data)
            written = True
    except BaseException:
        if written:
            for dest, _ in files:
                dest.unlink(missing_ok=True)
        raise


def export_to_faiss(model: Any, texts: Sequence[str], path: str | os.PathLike[str], *,
                    index_type: str = "flat", ids: Sequence[int] | Sequence[str] | None = None,
                    metric: str = "inner_product", normalize: bool = True,
                    tokenizer: Any = None, batch_size: int = 64, max_length: int | None = None,
                    hnsw_m: int = 32, ef_construction: int = 200, ef_search: int = 128,
                    keep_embeddings: bool = True) -> Path:
    """Embed ``texts`` with ``model`` (:func:`~nnx.embeddings.embed_texts`) and write a
    FAISS index of them at ``path`` (row i = ``texts[i]``) with its sidecars; returns
    ``path``. ``index_type="flat"`` searches exactly; ``"hnsw"`` approximately (graph
    degree ``hnsw_m``, build beam ``ef_construction``, stored search beam ``ef_search``).
    """
    faiss = _faiss(_WHO)
    check_choice(f"{_WHO} index_type", index_type, INDEX_TYPES)
    check_choice(f"{_WHO} metric", metric, METRICS)
    m = check_count(f"{_WHO} hnsw_m", hnsw_m, minimum=2)
    efc = check_count(f"{_WHO} ef_construction", ef_construction)
    efs = check_count(f"{_WHO} ef_search", ef_search)
    if not isinstance(keep_embeddings, bool):
        raise TypeError(f"{_WHO} keep_embeddings must be a bool")
    embedder_net(model, _WHO)
    rows = check_texts(texts, _WHO)
    id_list = _check_ids(ids, len(rows))
    resolve_tokenizer(model, tokenizer, _WHO)
    dest = _check_destination(path)

    z = embed_texts(model, rows, tokenizer=tokenizer, batch_size=batch_size,
                    normalize=normalize, max_length=max_length)
    x = np.ascontiguousarray(z.numpy(), dtype=np.float32)
    index = build_index(faiss, x, index_type, metric, hnsw_m=m, ef_construction=efc,
                        ef_search=efs)
    index_bytes = faiss.serialize_index(index).tobytes()
    manifest = {"format": FORMAT, "index": dest.name, "index_type": index_type,
                "metric": metric, "dim": int(x.shape[1]), "count": int(x.shape[0]),
                "normalized": normalize, "index_sha256": sha256_hex(index_bytes),
                "ids": id_list}
    json_path, tensors_path = sidecar_paths(dest)
    files = [(json_path, canonical_bytes(manifest))]
    if keep_embeddings:
        tensors = {"embeddings": z.contiguous()}
        if id_list and isinstance(id_list[0], int):
            tensors["ids"] = torch.tensor(id_list, dtype=torch.int64)
        meta = {k: str(v) for k, v in manifest.items() if k != "ids"}
        files.append((tensors_path, save(tensors, metadata=meta)))
    files.append((dest, index_bytes))  # last: an index on disk has its mapping beside it
    _write_all(files)
    return dest


def read_faiss_ids(path: str | os.PathLike[str], *, verify: bool = True,
                   max_bytes: int = 256 * 1024 * 1024) -> list[int] | list[str]:
    """The position → id list of the index at ``path`` (its ``.ids.json`` sidecar);
    ``verify=True`` also checks the sidecar's SHA-256 against the index file, so a
    mapping never pairs with another export's index."""
    json_path, _ = sidecar_paths(path)
    doc = load_json(json_path, max_bytes=max_bytes)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"read_faiss_ids: {json_path} is not an {FORMAT} sidecar")
    ids = doc.get("ids")
    if not isinstance(ids, list) or len(ids) != doc.get("count"):
        raise ValueError(f"read_faiss_ids: {json_path} lists no ids for its count")
    if verify and sha256_hex(Path(path).read_bytes()) != doc.get("index_sha256"):
        raise ValueError(f"read_faiss_ids: {path} is not the index {json_path} describes "
                         "(SHA-256 differs)")
    return ids
