"""Query-grouped ranking with nnx-ranking's RankingTask (spec §24), offline.

A generated corpus: 240 queries × 20 candidates, each row the features of one
(query, document) pair, its grade 0..2 a hidden function of the features. The scorer is
an ordinary net (features in, one score out); the task does the rest:

* training batches keep each query's candidates together (pairs are formed within a
  batch): the pairwise logistic loss over every unequal pair of a query;
* validation buffers the whole stream, joins each query (here deliberately split across
  batches), ranks it by score (ties by candidate id) and averages MRR@k, Recall@k and
  NDCG@k (gain 2^rel − 1) over the queries that have a relevant candidate;
* ``task.metric_specs()`` declares the metrics, so ``MonitorSpec("ndcg_at_10")`` elects
  BEST; the trained ranker beats random scores on the same candidates.

Then a retrieval stage (spec §24's closing paragraph): nnx-embeddings' ``export_to_faiss``
writes a FAISS index of a small text corpus and returns its path; FAISS answers with
positions, which the caller maps to its own document ids through the index's
``.ids.json`` sidecar (``read_faiss_ids``) before an id-aligned evaluation with
``ranking_metrics`` (grades are keyed by query and document id, never by position).
Without nnx-embeddings that stage prints its install hint and is skipped.

    uv run python examples/ranking_offline.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import torch

from nnx import (
    Devices,
    MissingDistributionError,
    MonitorSpec,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
)
from nnx.ranking import RankingTask, ranking_metrics

FEATURES, PER_QUERY = 8, 20


def corpus(n_queries: int, first_query: int, seed: int) -> list[tuple]:
    """One (features, query_ids, candidate_ids, grades) entry per query."""
    g = torch.Generator().manual_seed(seed)
    hidden = torch.linspace(1.0, -1.0, FEATURES)
    out = []
    for q in range(first_query, first_query + n_queries):
        x = torch.randn(PER_QUERY, FEATURES, generator=g)
        signal = x @ hidden + 0.3 * torch.randn(PER_QUERY, generator=g)
        grades = (signal > 1.0).long() + (signal > 2.5).long()
        out.append((x, [q] * PER_QUERY, [f"doc{q}-{i}" for i in range(PER_QUERY)], grades))
    return out


def batches(queries: list[tuple], per_batch: int) -> list[tuple]:
    """Queries concatenated ``per_batch`` at a time."""
    out = []
    for i in range(0, len(queries), per_batch):
        part = queries[i:i + per_batch]
        out.append((torch.cat([p[0] for p in part]), [q for p in part for q in p[1]],
                    [c for p in part for c in p[2]], torch.cat([p[3] for p in part])))
    return out


def split_halves(queries: list[tuple]) -> list[tuple]:
    """Every query cut in two, the halves in separate batches, second halves first."""
    half = PER_QUERY // 2
    tail = [(x[half:], q[half:], c[half:], r[half:]) for x, q, c, r in queries]
    head = [(x[:half], q[:half], c[:half], r[:half]) for x, q, c, r in queries]
    return batches(tail, 6) + batches(head, 6)


def main() -> None:
    torch.manual_seed(0)
    task = RankingTask(ks=(1, 5, 10), max_relevance=2)
    model = NNModel(net_params=NNParams(input_dim=FEATURES, output_dim=1, hidden_dims=(16,)),
                    params=NNModelParams(device=Devices.CPU), task=task)
    train, val = corpus(200, 0, seed=1), corpus(40, 1000, seed=2)
    params = NNTrainParams(
        n_epochs=6, train_loader=batches(train, 8), val_loader=split_halves(val),
        optim=NNOptimParams.builder().adamw(max_lr=1e-2).build(), scheduler=None, seed=0,
        metrics=task.metric_specs(), monitor=MonitorSpec("ndcg_at_10"))
    with tempfile.TemporaryDirectory() as root:
        run = model.train(params, root=root, verbose=False)
    record = run.epoch_records()[-1].val_edp
    print(f"run {run.id}: {record.count} queries scored, "
          f"{int(record.metrics['excluded_queries'])} excluded (no relevant candidate)")
    for k in task.ks:
        print(f"  MRR@{k} {record.metrics[f'mrr_at_{k}']:.3f}  "
              f"Recall@{k} {record.metrics[f'recall_at_{k}']:.3f}  "
              f"NDCG@{k} {record.metrics[f'ndcg_at_{k}']:.3f}")

    # The same candidates under random scores: the floor a ranker must beat.
    ids = [q for _, qs, _, _ in val for q in qs]
    docs = [c for _, _, cs, _ in val for c in cs]
    grades = torch.cat([r for *_, r in val]).numpy()
    floor = ranking_metrics(ids, docs, grades, np.random.default_rng(0).normal(size=len(ids)),
                            ks=(10,))["ndcg_at_10"]
    print(f"random scores: NDCG@10 {floor:.3f}")
    assert record.metrics["ndcg_at_10"] > floor + 0.1
    with tempfile.TemporaryDirectory() as root:
        faiss_stage(root)


# The FAISS stage: NNx writes the index and the position → id sidecar; mapping positions
# back to document ids (and so to grades, which are keyed by id) is the caller's.
TOPICS = [f"t{i}" for i in range(30)]


class Words:
    """Whitespace words → ids (0 pads)."""

    pad_id = 0

    def __init__(self) -> None:
        self.vocab = {w: i + 1 for i, w in enumerate(TOPICS)}

    def encode(self, text: str) -> list[int]:
        return [self.vocab[w] for w in text.split()]


class BagOfWords(torch.nn.Module):
    """Token ids → token vectors; embed_texts averages them into one row per text."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(len(TOPICS) + 1, 32)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids)


def faiss_stage(root: str) -> None:
    try:  # nnx-embeddings is a separate distribution: absent, its import names the install
        from nnx.embeddings import embed_texts, export_to_faiss, read_faiss_ids
    except MissingDistributionError as absent:
        print(f"FAISS export: skipped ({absent})")
        return
    import faiss

    rng = np.random.default_rng(3)
    docs = {f"kb-{i:02d}": " ".join(rng.choice(TOPICS, 3, replace=False)) for i in range(60)}
    queries = {f"q{i}": " ".join(rng.choice(TOPICS, 2, replace=False)) for i in range(20)}
    torch.manual_seed(0)
    embedder, tok = BagOfWords(), Words()
    doc_ids = sorted(docs)
    path = export_to_faiss(embedder, [docs[d] for d in doc_ids], Path(root) / "kb.faiss",
                           ids=doc_ids, tokenizer=tok)
    ids = read_faiss_ids(path)  # position → "kb-.."; checked against the index's digest
    q_ids = sorted(queries)
    scores, positions = faiss.read_index(str(path)).search(
        embed_texts(embedder, [queries[q] for q in q_ids], tokenizer=tok).numpy(), 10)
    rows = [(q, ids[p], float(s)) for q, row, srow in zip(q_ids, positions, scores, strict=True)
            for p, s in zip(row, srow, strict=True)]
    # Grades are keyed by (query id, document id): shared topic words, 0..2.
    grade = [len(set(queries[q].split()) & set(docs[d].split())) for q, d, _ in rows]
    metrics = ranking_metrics([q for q, _, _ in rows], [d for _, d, _ in rows], grade,
                              [s for _, _, s in rows], ks=(10,))
    print(f"FAISS export {path.name} ({len(ids)} documents, ids from its sidecar): "
          f"top-10 retrieval MRR@10 {metrics['mrr_at_10']:.3f} "
          f"NDCG@10 {metrics['ndcg_at_10']:.3f} over {int(metrics['queries'])} queries")
    assert metrics["mrr_at_10"] > 0.5


if __name__ == "__main__":
    main()
