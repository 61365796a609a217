"""export_to_faiss (spec §16, §24): the index, its position → id sidecars, its refusals."""

from __future__ import annotations

import json
import random
import sys

import faiss
import numpy as np
import pytest
import torch
from _emb_tiny import Counting, WordTokenizer, embedder
from safetensors import safe_open

import nnx.embeddings.faiss_export as faiss_export
from nnx.embeddings import embed_texts, export_to_faiss, read_faiss_ids, sidecar_paths

WORDS = [f"w{i}" for i in range(300)]
TOK = WordTokenizer(WORDS)


def corpus(n: int, seed: int = 0, k: int = 6) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=k)) for _ in range(n)]


def files(tmp_path) -> set[str]:
    return {p.name for p in tmp_path.iterdir()}


def test_flat_top10_ids_equal_a_brute_force_torch_matmul(tmp_path):
    model = embedder(len(WORDS) + 2, dim=24)
    docs, queries = corpus(500), corpus(40, seed=1)
    ids = [f"doc-{i:04d}" for i in range(len(docs))]
    path = export_to_faiss(model, docs, tmp_path / "corpus.faiss", ids=ids, tokenizer=TOK,
                           batch_size=128)
    assert path == tmp_path / "corpus.faiss"
    assert files(tmp_path) == {"corpus.faiss", "corpus.faiss.ids.json",
                               "corpus.faiss.safetensors"}
    index = faiss.read_index(str(path))
    assert index.ntotal == 500 and index.metric_type == faiss.METRIC_INNER_PRODUCT
    q = embed_texts(model, queries, tokenizer=TOK)
    scores, positions = index.search(q.numpy(), 10)
    d = embed_texts(model, docs, tokenizer=TOK)
    want_scores, want = torch.topk(q @ d.T, 10, dim=1)
    mapping = read_faiss_ids(path)
    assert [[mapping[p] for p in row] for row in positions.tolist()] == \
           [[ids[p] for p in row] for row in want.tolist()]
    np.testing.assert_allclose(scores, want_scores.numpy(), atol=1e-5)


def test_the_sidecars_hold_the_mapping_and_the_embeddings(tmp_path):
    model = embedder(len(WORDS) + 2)
    docs = corpus(30)
    ids = list(range(100, 130))
    path = export_to_faiss(model, docs, tmp_path / "i.faiss", ids=ids, tokenizer=TOK)
    json_path, tensors_path = sidecar_paths(path)
    doc = json.loads(json_path.read_text())
    assert {k: doc[k] for k in ("format", "index", "index_type", "metric", "dim", "count",
                                "normalized", "ids")} == {
        "format": "nnx.embeddings.faiss/1", "index": "i.faiss", "index_type": "flat",
        "metric": "inner_product", "dim": 16, "count": 30, "normalized": True, "ids": ids}
    with safe_open(str(tensors_path), "pt") as f:
        torch.testing.assert_close(f.get_tensor("embeddings"),
                                   embed_texts(model, docs, tokenizer=TOK))
        assert f.get_tensor("ids").tolist() == ids
        assert f.metadata()["index_type"] == "flat"
    # Without ids the positions are the ids; without keep_embeddings no tensor sidecar.
    plain = export_to_faiss(model, docs, tmp_path / "p.faiss", tokenizer=TOK,
                            keep_embeddings=False, index_type="hnsw", metric="l2")
    assert read_faiss_ids(plain) == list(range(30))
    assert not sidecar_paths(plain)[1].exists()
    assert faiss.read_index(str(plain)).metric_type == faiss.METRIC_L2


def test_a_mapping_never_pairs_with_another_index(tmp_path):
    model = embedder(len(WORDS) + 2)
    a = export_to_faiss(model, corpus(5), tmp_path / "a.faiss", tokenizer=TOK)
    b = export_to_faiss(model, corpus(6, seed=2), tmp_path / "b.faiss", tokenizer=TOK)
    a.write_bytes(b.read_bytes())
    with pytest.raises(ValueError, match="SHA-256 differs"):
        read_faiss_ids(a)
    assert read_faiss_ids(a, verify=False) == list(range(5))


@pytest.mark.parametrize("kwargs, error, match", [
    ({"index_type": "ivf"}, ValueError, "index_type"),
    ({"metric": "cosine"}, ValueError, "metric"),
    ({"ids": [1, 2]}, ValueError, "2 ids for 3 texts"),
    ({"ids": [1, 1, 2]}, ValueError, "id 1 is given twice"),
    ({"ids": [1, "b", 2]}, TypeError, "all integers or all strings"),
    ({"ids": [True, False, 2]}, TypeError, "all integers or all strings"),
    ({"hnsw_m": 1}, ValueError, "hnsw_m"),
    ({"ef_search": 0}, ValueError, "ef_search"),
    ({"keep_embeddings": "yes"}, TypeError, "keep_embeddings"),
    ({"tokenizer": None}, TypeError, "needs tokenizer="),
    ({"texts": ["w1", ""]}, ValueError, "encodes to no tokens"),
    ({"path": "missing/dir/x.faiss"}, FileNotFoundError, "does not exist"),
    ({"path": "."}, IsADirectoryError, "is a directory"),
])
def test_refusals_come_before_any_forward_and_any_file(tmp_path, monkeypatch, kwargs, error,
                                                       match):
    monkeypatch.chdir(tmp_path)
    net = Counting(len(WORDS) + 2)
    Counting.calls = 0
    call = {"texts": ["w1 w2", "w3", "w4 w5 w6"], "path": tmp_path / "x.faiss",
            "tokenizer": TOK, **kwargs}
    with pytest.raises(error, match=match):
        export_to_faiss(net, call.pop("texts"), call.pop("path"), **call)
    assert Counting.calls == 0 and files(tmp_path) == set()


def test_a_failed_write_leaves_no_file(tmp_path, monkeypatch):
    model = embedder(len(WORDS) + 2)
    real = faiss_export.atomic_write_bytes
    written = []

    def fail_on_the_index(dest, data, **kw):
        if dest.name == "x.faiss":
            raise OSError("disk full")
        written.append(dest.name)
        return real(dest, data, **kw)

    monkeypatch.setattr(faiss_export, "atomic_write_bytes", fail_on_the_index)
    with pytest.raises(OSError, match="disk full"):
        export_to_faiss(model, corpus(8), tmp_path / "x.faiss", tokenizer=TOK)
    assert written == ["x.faiss.ids.json", "x.faiss.safetensors"]
    assert files(tmp_path) == set()


def test_a_failed_re_export_never_leaves_a_mixed_set(tmp_path, monkeypatch):
    model = embedder(len(WORDS) + 2)
    old = export_to_faiss(model, corpus(5), tmp_path / "x.faiss", ids=list(range(5)),
                          tokenizer=TOK)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    real = faiss_export.atomic_write_bytes

    def fail_at(name):
        def write(dest, data, **kw):
            if dest.name == name:
                raise OSError("disk full")
            return real(dest, data, **kw)
        return write

    # Failing at the first write: the previous export stays whole and readable.
    monkeypatch.setattr(faiss_export, "atomic_write_bytes", fail_at("x.faiss.ids.json"))
    with pytest.raises(OSError):
        export_to_faiss(model, corpus(7, seed=3), old, tokenizer=TOK)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before
    assert read_faiss_ids(old) == list(range(5))
    # Failing later: the old index never sits beside the new mapping; nothing is left.
    monkeypatch.setattr(faiss_export, "atomic_write_bytes", fail_at("x.faiss"))
    with pytest.raises(OSError):
        export_to_faiss(model, corpus(7, seed=3), old, tokenizer=TOK)
    assert files(tmp_path) == set()


def test_without_faiss_the_import_error_names_the_install_before_any_work(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setitem(sys.modules, "faiss", None)  # `import faiss` now fails as if absent
    net = Counting(len(WORDS) + 2)
    Counting.calls = 0
    with pytest.raises(ImportError, match=r"pip install faiss-cpu") as raised:
        export_to_faiss(net, ["w1"], tmp_path / "x.faiss", tokenizer=TOK,
                        index_type="not-checked-yet")
    assert "export_to_faiss needs FAISS" in str(raised.value)
    assert Counting.calls == 0 and files(tmp_path) == set()


@pytest.mark.slow
def test_hnsw_default_recall_at_10_against_flat_on_20k_vectors(tmp_path):
    words = [f"v{i}" for i in range(2000)]
    tok = WordTokenizer(words)
    rng = random.Random(0)
    docs = [" ".join(rng.choices(words, k=8)) for _ in range(20_000)]
    queries = [" ".join(rng.choices(words, k=8)) for _ in range(300)]
    model = embedder(len(words) + 2, dim=32)
    flat = export_to_faiss(model, docs, tmp_path / "flat.faiss", tokenizer=tok,
                           batch_size=2048, keep_embeddings=False)
    hnsw = export_to_faiss(model, docs, tmp_path / "hnsw.faiss", index_type="hnsw",
                           tokenizer=tok, batch_size=2048, keep_embeddings=False)
    q = embed_texts(model, queries, tokenizer=tok).numpy()
    _, exact = faiss.read_index(str(flat)).search(q, 10)
    _, approx = faiss.read_index(str(hnsw)).search(q, 10)
    recall = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(exact, approx, strict=True)])
    assert recall >= 0.95
