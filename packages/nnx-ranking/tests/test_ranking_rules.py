"""Spec §24 rule by rule where the broader tests leave a rule implicit: the worked numbers
through the evaluation step, the record's exact fields, the loss over scored queries
only, host ids, the buffer bound, per-query averaging and the bounded pair blocks."""

from __future__ import annotations

import math
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from _ranking_tiny import files, model, plan, queries, same, weights

import nnx.ranking.pairwise as pairwise
from nnx import Devices, MonitorSpec, NNModel, NNModelParams, NNSchedulerParams
from nnx.callbacks import EarlyStopping
from nnx.ranking import RankingBatchError, RankingEvaluationError, RankingTask, ranking_metrics

WORKED_LOSS = math.log1p(math.exp(-2))  # relevance [1, 0], scores [2, 0]
WORKED_NDCG = 3 / (3 + 1 / math.log2(3))  # relevance [2, 0, 1], scores [3, 2, 1], k = 2


def exact(task: RankingTask) -> NNModel:
    """A scorer whose score is the first feature, so the scores are the test's own."""
    scorer = torch.nn.Linear(1, 1)
    with torch.no_grad():
        scorer.weight.fill_(1.0)
        scorer.bias.zero_()
    return NNModel(module=scorer, params=NNModelParams(device=Devices.CPU), task=task)


def stream(*rows: tuple[Any, Any, float, int]) -> list[tuple[Any, ...]]:
    """One batch of (query id, candidate id, score, grade) rows."""
    q, c, s, r = zip(*rows, strict=True)
    return [(torch.tensor(s, dtype=torch.float32).reshape(-1, 1), list(q), list(c),
             torch.tensor(r))]


def evaluate(task: RankingTask, batches: list[tuple[Any, ...]]) -> Any:
    return task.eval_step()(SimpleNamespace(model=exact(task), val_loader=batches))


def test_the_worked_numbers_through_the_evaluation_step() -> None:
    task = RankingTask(ks=(2,), max_relevance=2)
    record = evaluate(task, stream(("q", 0, 3.0, 2), ("q", 1, 2.0, 0), ("q", 2, 1.0, 1)))
    assert record.metrics["mrr_at_2"] == 1.0 and record.metrics["recall_at_2"] == 0.5
    assert record.metrics["ndcg_at_2"] == pytest.approx(WORKED_NDCG, abs=1e-12)
    assert round(record.metrics["ndcg_at_2"], 6) == 0.826235
    pair = evaluate(RankingTask(ks=(1,)), stream(("q", 0, 2.0, 1), ("q", 1, 0.0, 0)))
    assert pair.loss == pytest.approx(WORKED_LOSS, abs=1e-12)
    assert round(pair.loss, 6) == 0.126928


def test_the_record_carries_exactly_the_declared_fields() -> None:
    rows = stream(("a", 0, 3.0, 2), ("a", 1, 2.0, 0), ("a", 2, 1.0, 1),
                  ("b", 0, 1.0, 0), ("b", 1, 0.0, 0))  # b: no relevant candidate
    record = evaluate(RankingTask(ks=(1, 2), max_relevance=2), rows)
    state = record.state()
    # kind / count / status / loss / metrics: no classification field is filled in.
    assert set(state) == {"loss", "metrics", "kind", "count", "status"}
    assert (record.kind, record.count, record.status) == ("ranking", 1, "ok")
    assert set(record.metrics) == {
        "mrr_at_1", "recall_at_1", "ndcg_at_1", "mrr_at_2", "recall_at_2", "ndcg_at_2",
        "queries", "excluded_queries", "candidates", "candidates_per_query",
        "exhaustive_candidates"}
    assert {k: record.metrics[k] for k in ("queries", "excluded_queries", "candidates",
                                           "candidates_per_query", "exhaustive_candidates")} \
        == {"queries": 2.0, "excluded_queries": 1.0, "candidates": 5.0,
            "candidates_per_query": 2.5, "exhaustive_candidates": 0.0}
    full = evaluate(RankingTask(ks=(1,), max_relevance=2, candidates="exhaustive"), rows)
    assert full.metrics["exhaustive_candidates"] == 1.0


def test_the_records_loss_covers_the_scored_queries_only() -> None:
    # Query b has an unequal pair (grades 1, 0) but nothing at the threshold 2: it is
    # excluded, so its pair (loss log(1 + e^2)) must not reach the record's loss.
    task = RankingTask(ks=(1,), max_relevance=2, relevance_threshold=2)
    record = evaluate(task, stream(("a", 0, 2.0, 2), ("a", 1, 0.0, 0),
                                   ("b", 0, 0.0, 1), ("b", 1, 2.0, 0)))
    assert (record.count, record.metrics["excluded_queries"]) == (1, 1.0)
    assert record.loss == pytest.approx(WORKED_LOSS, abs=1e-12)


def test_a_metric_is_a_mean_over_queries_never_over_rows() -> None:
    # Query 1 (4 candidates): the relevant one second, MRR 1/2; query 2 (2 candidates):
    # first, MRR 1. Per query: 3/4; weighted by rows it would be 2/3.
    out = ranking_metrics([1, 1, 1, 1, 2, 2], [0, 1, 2, 3, 0, 1], [0, 1, 0, 0, 1, 0],
                          [4.0, 3.0, 2.0, 1.0, 1.0, 0.0], ks=(2,))
    assert out["mrr_at_2"] == 0.75 and out["candidates_per_query"] == 3.0


def test_ids_are_host_values_whatever_container_they_arrive_in() -> None:
    task = RankingTask(ks=(1,), max_relevance=2)
    x, q, _, r = queries(1, per=4)[0]
    as_lists = task.parse((x, q, [5, 6, 7, 8], r))
    as_tensors = task.parse((x, torch.tensor(q), torch.tensor([5, 6, 7, 8]), r))
    assert as_tensors.query_ids == as_lists.query_ids == q
    assert as_tensors.candidate_ids == [5, 6, 7, 8]
    assert all(type(v) is int for v in as_tensors.query_ids + as_tensors.candidate_ids)
    for bad in (torch.tensor([0.0, 0.0, 0.0, 0.0]), torch.tensor([True, True, False, True])):
        with pytest.raises(RankingBatchError, match="integers or strings"):
            task.parse((x, bad, [5, 6, 7, 8], r))


def test_the_buffer_holds_at_most_max_buffered_valid_rows() -> None:
    m = model(RankingTask(ks=(1,)))
    data = queries(2, per=4)  # 8 valid rows
    ok = RankingTask(ks=(1,), max_relevance=2, max_buffered=8).eval_step()(
        SimpleNamespace(model=m, val_loader=data))
    assert ok.status == "ok" and ok.metrics["candidates"] == 8.0
    # Masked padding rows are not buffered, so they do not count against the limit.
    x, q, c, r = data[1]
    padded = [data[0], (torch.cat([x, torch.zeros(3, 3)]), [*q, 1, 1, 1],
                        [*c, "p0", "p1", "p2"], torch.cat([r, r.new_zeros(3)]),
                        torch.tensor([True] * 4 + [False] * 3))]
    assert RankingTask(ks=(1,), max_relevance=2, max_buffered=8).eval_step()(
        SimpleNamespace(model=m, val_loader=padded)).state() == ok.state()
    with pytest.raises(RankingEvaluationError, match="max_buffered=7"):
        RankingTask(ks=(1,), max_relevance=2, max_buffered=7).eval_step()(
            SimpleNamespace(model=m, val_loader=data))


def test_a_bad_validation_batch_is_refused_before_any_run_or_update(tmp_path) -> None:
    task = RankingTask(ks=(1,), max_relevance=2)
    x, q, c, r = queries(1)[0]
    m = model(task)
    before = weights(m)
    with pytest.raises(RankingBatchError, match="one entry per row"):
        m.train(plan(queries(2), val_loader=[(x, q, c, r, torch.ones(3, dtype=torch.bool))]),
                root=tmp_path, verbose=False)
    assert same(weights(m), before)
    assert [p for p in files(tmp_path) if not p.startswith(".")] == []


class _Blocks:
    """Records the (rows, columns) of every pair block formed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.shapes: list[tuple[int, int]] = []
        original = pairwise._block

        def block(scores_hi: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
            self.shapes.append((int(scores_hi.shape[0]), int(rest[1].shape[0])))
            return original(scores_hi, *rest)

        monkeypatch.setattr(pairwise, "_block", block)


def test_the_block_size_bounds_every_pair_matrix(monkeypatch: pytest.MonkeyPatch) -> None:
    n = 2 * pairwise.BLOCK_ROWS + 37
    g = torch.Generator().manual_seed(0)
    grades, base = torch.randint(0, 3, (n,), generator=g), torch.randn(n, generator=g)
    blocks = _Blocks(monkeypatch)
    with torch.no_grad():  # evaluation: blocks formed once, nothing kept
        pairwise.pairwise_sum(base, grades)
    assert blocks.shapes == [(pairwise.BLOCK_ROWS, n)] * 2 + [(37, n)]
    # Training: nothing saved for backward is as large as a block (the blocks are
    # recomputed in backward), so the graph holds O(n) values, never n × n.
    blocks.shapes.clear()
    saved: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t.numel())
        return t

    scores = base.clone().requires_grad_()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        total = pairwise.pairwise_sum(scores, grades)
    assert len(blocks.shapes) == 3 and max(saved) <= n
    total.backward()
    # Each block formed again in backward (in reverse order), none kept from forward.
    assert sorted(blocks.shapes) == sorted([(pairwise.BLOCK_ROWS, n)] * 4 + [(37, n)] * 2)


def test_the_ndcg_monitor_drives_early_stopping_and_the_plateau_schedule(tmp_path) -> None:
    # All-zero features: every score ties, so NDCG@1 is the same every epoch (ties by
    # candidate id) and never improves after the first epoch.
    task = RankingTask(ks=(1,), max_relevance=2)
    flat = [(torch.zeros_like(x), q, c, r) for x, q, c, r in queries(3)]
    val = [(torch.zeros_like(x), q, c, r) for x, q, c, r in queries(3, seed=1)]
    monitor = MonitorSpec("ndcg_at_1")
    fit = replace(plan(flat, n_epochs=3, val_loader=val, metrics=task.metric_specs(),
                       monitor=monitor), scheduler=NNSchedulerParams(patience=0, factor=0.5))
    run = model(task).train(fit, root=tmp_path / "plateau", verbose=False)
    records = run.epoch_records()
    assert [r.selection.value for r in records] == [r.val_edp.metrics["ndcg_at_1"]
                                                    for r in records]
    assert [r.selection.metric for r in records] == ["ndcg_at_1"] * 3
    lrs = [r.lr for r in records]
    assert lrs[2] < lrs[1]  # no improvement: the plateau schedule cut the rate
    stop = EarlyStopping(monitor, patience=0)
    stopped = model(task).train(plan(flat, n_epochs=5, val_loader=val,
                                     metrics=task.metric_specs()), callbacks=[stop],
                                root=tmp_path / "stop", verbose=False)
    assert len(stopped.epoch_records()) == 2 and stop.stopped_epoch is not None
