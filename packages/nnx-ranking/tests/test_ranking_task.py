"""RankingTask end to end (spec §24): a Task-protocol object trained through NNModel,
validated per query over the whole buffered stream, selected by MonitorSpec("ndcg_at_k"),
and checkpointed as component state "ranking.task"."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from _ranking_tiny import files, model, plan, queries, same, weights

from nnx import Devices, Losses, MetricSpec, MonitorSpec, NNModel, NNModelParams, NNParams
from nnx.components import ComponentRestoreError
from nnx.extend import Task
from nnx.ranking import RankingBatchError, RankingEvaluationError, RankingTask


def test_the_task_answers_the_protocol_and_declares_its_metrics() -> None:
    task = RankingTask(ks=(1, 2), max_relevance=2)
    assert isinstance(task, Task)
    assert [s.label for s in task.metric_specs()] == [
        "mrr_at_1", "mrr_at_2", "recall_at_1", "recall_at_2", "ndcg_at_1", "ndcg_at_2"]
    assert task.metric_specs()[-1] == MetricSpec("ranking.ndcg", config={"k": 2},
                                                 name="ndcg_at_2")
    assert task.identity() == {"kind": "ranking.task", "ks": [1, 2], "max_relevance": 2}
    assert RankingTask().identity() == {"kind": "ranking.task"}


@pytest.mark.parametrize("kwargs, match", [
    ({"ks": (0,)}, "ks"), ({"ks": (-1,)}, "ks"), ({"ks": ()}, "ks"), ({"ks": (2, 2)}, "twice"),
    ({"max_relevance": 0}, "max_relevance"), ({"group_size": 0}, "group_size"),
    ({"version": 0}, "version"),
    ({"relevance_threshold": 2}, "relevance_threshold"), ({"weighting": "row"}, "weighting"),
    ({"candidates": "all"}, "candidates"), ({"max_buffered": 0}, "max_buffered"),
    ({"ks": (5,), "group_size": 4}, "group_size"),
])
def test_declarations_are_checked(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        RankingTask(**kwargs)


def test_a_ranker_trains_validates_per_query_and_monitor_selects_best(tmp_path) -> None:
    task = RankingTask(ks=(1, 2), max_relevance=2)
    m = model(task)
    data = queries(6)
    run = m.train(plan(data, n_epochs=3, val_loader=queries(4, seed=1),
                       metrics=task.metric_specs(), monitor=MonitorSpec("ndcg_at_2")),
                  root=tmp_path, verbose=False)
    assert run.state()["task"] == task.identity()
    val = run.epoch_records()[-1].val_edp
    assert (val.kind, val.status) == ("ranking", "ok")
    assert val.count == val.metrics["queries"] - val.metrics["excluded_queries"]
    assert 0.0 <= val.metrics["ndcg_at_2"] <= 1.0 and val.accuracy is None
    assert val.metrics["exhaustive_candidates"] == 0.0
    assert val.metrics["candidates_per_query"] == 4.0
    assert math.isfinite(val.loss)
    assert run.epoch_records()[0].train_edp.loss > 0
    assert any((tmp_path / run.id).rglob("*best*"))  # the monitor elected a BEST


def test_a_query_split_across_batches_scores_as_if_whole() -> None:
    task = RankingTask(ks=(1, 3), max_relevance=2)
    # A scorer exact row by row (score = first feature), so only the join is under test.
    scorer = torch.nn.Linear(3, 1)
    with torch.no_grad():
        scorer.weight.copy_(torch.tensor([[1.0, 0.0, 0.0]]))
        scorer.bias.zero_()
    m = NNModel(module=scorer, params=NNModelParams(device=Devices.CPU), task=task)
    whole = queries(3, per=6, seed=2)
    split = []
    for x, q, c, r in reversed(whole):  # each query in two parts, arriving out of order
        split.append((x[3:], q[3:], c[3:], r[3:]))
    for x, q, c, r in whole:
        split.append((x[:3], q[:3], c[:3], r[:3]))
    step = task.eval_step()
    a = step(SimpleNamespace(model=m, val_loader=whole))
    b = step(SimpleNamespace(model=m, val_loader=split))
    assert a.state() == b.state()
    twice = [*whole, whole[0]]
    with pytest.raises(RankingBatchError, match="listed twice"):
        step(SimpleNamespace(model=m, val_loader=twice))


def test_an_all_excluded_epoch_is_empty_and_never_best(tmp_path) -> None:
    task = RankingTask(ks=(1,), max_relevance=2)
    no_relevant = [(x, q, c, torch.zeros_like(r)) for x, q, c, r in queries(2, seed=3)]
    run = model(task).train(plan(queries(3), n_epochs=2, val_loader=no_relevant,
                                 metrics=task.metric_specs(), monitor=MonitorSpec("ndcg_at_1")),
                            root=tmp_path, verbose=False)
    val = run.epoch_records()[-1].val_edp
    assert (val.status, val.count, val.metrics["excluded_queries"]) == ("empty", 0, 2.0)
    assert "ndcg_at_1" not in val.metrics and val.loss is None
    assert not any((tmp_path / run.id).rglob("*best*"))


def test_a_bad_batch_is_refused_before_any_update(tmp_path) -> None:
    task = RankingTask(ks=(1,), max_relevance=2)
    x, q, c, r = queries(1)[0]
    bad = {
        "length": (x, q[:-1], c, r),
        "mixed ids": (x, [0, "0", 0, 0], c, r),
        "twice": (x, q, ["a", "a", "b", "c"], r),
        "grade": (x, q, c, torch.tensor([0, 1, 3, 0])),
        "mask": (x, q, c, r, torch.tensor([1, 0, 2, 1])),
        "mask shape": (x, q, c, r, torch.tensor([True, True, True])),
        "float mask": (x, q, c, r, torch.tensor([1.0, 0.0, 1.0, 1.0])),
    }
    for what, batch in bad.items():
        m = model(task)
        before = weights(m)
        root = tmp_path / what.replace(" ", "_")
        with pytest.raises(RankingBatchError):  # the bad batch second: scanned up front
            m.train(plan([queries(1)[0], batch]), root=root, verbose=False)
        assert same(weights(m), before) and files(root) == {}, what


def test_a_scorer_without_one_score_per_row_is_refused(tmp_path) -> None:
    wide = NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(4,)),
                   params=NNModelParams(device=Devices.CPU),
                   task=RankingTask(ks=(1,), max_relevance=2))
    before = weights(wide)
    with pytest.raises(RankingBatchError, match="one score per row"):
        wide.train(plan(queries(1)), root=tmp_path, verbose=False)
    assert same(weights(wide), before)
    # Refused at the first forward: no run directory is left (the runs root's own lock
    # files aside).
    assert [p for p in files(tmp_path) if not p.startswith(".")] == []


def test_masked_rows_count_nowhere_and_a_mapping_batch_is_read() -> None:
    task = RankingTask(ks=(1,), max_relevance=2)
    m = model(task)
    x, q, c, r = queries(1, per=4)[0]
    padded = {"features": torch.cat([x, torch.zeros(2, 3)]), "query_ids": [*q, 0, 0],
              "candidate_ids": [*c, "pad", "pad"], "relevance": torch.cat([r, r.new_zeros(2)]),
              "mask": torch.tensor([True] * 4 + [False] * 2)}
    step = task.eval_step()
    assert step(SimpleNamespace(model=m, val_loader=[padded])).state() == \
        step(SimpleNamespace(model=m, val_loader=[(x, q, c, r)])).state()


def test_the_default_paths_are_refused() -> None:
    m = model(RankingTask(ks=(1,)))
    with pytest.raises(RankingEvaluationError, match="predict"):
        m.predict(torch.zeros(2, 3))
    with pytest.raises(RankingEvaluationError, match="evaluate"):
        m.evaluate(queries(1))


def test_the_buffer_limit_and_a_cutoff_above_a_query_are_refused() -> None:
    m = model(RankingTask(ks=(1,)))
    with pytest.raises(RankingEvaluationError, match="max_buffered=5"):
        RankingTask(ks=(1,), max_relevance=2, max_buffered=5).eval_step()(
            SimpleNamespace(model=m, val_loader=queries(2)))
    with pytest.raises(RankingEvaluationError, match="k=5"):
        RankingTask(ks=(5,), max_relevance=2).eval_step()(
            SimpleNamespace(model=m, val_loader=queries(2)))


def test_a_resume_with_another_configuration_is_refused(tmp_path) -> None:
    task = RankingTask(ks=(1,), max_relevance=2)
    first = model(task).train(plan(queries(3), n_epochs=1), root=tmp_path, verbose=False)
    other = model(RankingTask(ks=(1,), max_relevance=2, weighting="pair"), seed=1)
    before, disk = weights(other), files(tmp_path)
    with pytest.raises(ComponentRestoreError, match=r"weighting='query'.*weighting='pair'"):
        other.train(plan(queries(3), n_epochs=1, resume_from_run_id=first.id,
                         resume_mode="stateful"), root=tmp_path, verbose=False)
    assert same(weights(other), before) and files(tmp_path) == disk
    resumed = model(task, seed=1).train(
        plan(queries(3), n_epochs=1, resume_from_run_id=first.id, resume_mode="stateful"),
        root=tmp_path, verbose=False)
    assert "ranking.task" in resumed.resume_status.restored_components


def test_group_size_is_every_querys_valid_candidate_count(tmp_path) -> None:
    task = RankingTask(ks=(1,), max_relevance=2, group_size=4)
    short = [(x[:3], q[:3], c[:3], r[:3]) for x, q, c, r in queries(1)]
    m = model(task)
    with pytest.raises(RankingBatchError, match=r"3 candidates.*group_size=4"):
        m.train(plan(queries(2) + short), root=tmp_path, verbose=False)
    assert files(tmp_path) == {}
    record = task.eval_step()(SimpleNamespace(model=m, val_loader=queries(2)))
    assert record.status == "ok"


def test_the_default_evaluation_path_refuses_a_ranking_metric(tmp_path) -> None:
    from nnx.testing import tiny_loader, tiny_model  # only here: a plain classifier

    plain = tiny_model(0)
    # Core's TASK_METRIC_INPUT check: only a task that lists the metric computes it, so
    # the row-by-row path refuses it before reading a batch, and so does a run whose
    # model has no ranking task, before any run directory exists.
    ndcg = MetricSpec("ranking.ndcg", config={"k": 1})
    with pytest.raises(ValueError, match="computed by a task's own evaluation step"):
        plain.evaluate(tiny_loader(), metrics=[ndcg])
    with pytest.raises(ValueError, match="computed by a task's own evaluation step"):
        plain.train(plan(tiny_loader(), metrics=[ndcg]), root=tmp_path, verbose=False)
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    task = RankingTask(ks=(1,), max_relevance=2)
    with pytest.raises(ValueError, match=r"RankingTask.metric_specs\(\) does not list"):
        model(task).train(plan(queries(2), metrics=[MetricSpec("ranking.ndcg",
                                                                config={"k": 3})]),
                          root=tmp_path, verbose=False)
    with pytest.raises(ValueError, match="config"):
        plain.evaluate(tiny_loader(), metrics=[MetricSpec("ranking.ndcg", config={"k": 0})])


@pytest.mark.parametrize("loss", ["CROSS_ENTROPY", "MEAN_SQUARED_ERROR"])
def test_the_ranking_metrics_do_not_depend_on_the_models_loss(tmp_path, loss: str) -> None:
    # The scorer trains on the task's pairwise objective; NNModelParams.loss only picks
    # core's per-batch machinery, which never serves these metrics (TASK_METRIC_INPUT).
    task = RankingTask(ks=(2,), max_relevance=2)
    torch.manual_seed(0)
    m = NNModel(net_params=NNParams(input_dim=3, output_dim=1),
                params=NNModelParams(device=Devices.CPU, loss=Losses[loss]), task=task)
    run = m.train(plan(queries(4), val_loader=queries(2, seed=1),
                       metrics=task.metric_specs(), monitor=MonitorSpec("ndcg_at_2")),
                  root=tmp_path, verbose=False)
    assert 0.0 <= run.epoch_records()[-1].val_edp.metrics["ndcg_at_2"] <= 1.0


def test_masked_padding_rows_do_not_train(tmp_path) -> None:
    task = RankingTask(ks=(1,), max_relevance=2)
    plain = queries(3, per=4)
    padded = [(torch.cat([x, torch.ones(2, 3)]), [*q, q[0], q[0]], [*c, "p1", "p2"],
               torch.cat([r, torch.tensor([2, 0])]), torch.tensor([True] * 4 + [False] * 2))
              for x, q, c, r in plain]  # the padding would add a pair if it counted
    a, b = model(task), model(task)
    ra = a.train(plan(plain, n_epochs=2), root=tmp_path / "a", verbose=False)
    rb = b.train(plan(padded, n_epochs=2), root=tmp_path / "b", verbose=False)
    assert ra.epoch_records()[-1].train_edp.loss == pytest.approx(
        rb.epoch_records()[-1].train_edp.loss, rel=1e-6)
    for k, v in weights(a).items():
        assert torch.allclose(v, weights(b)[k], atol=1e-6), k
