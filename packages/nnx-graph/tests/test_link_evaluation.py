"""LinkTask's evaluator and predict (spec §26 "Exact metrics", "Shapes", "Batch roles"):
every validation candidate scored exactly once from float64 logits, the record without
AUROC / AP for a one-class set, predictions aligned in candidate order."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from _link_tiny import N, a_split, graph, model, plan

from nnx import MonitorSpec
from nnx.link_tasks import LinkBatchError, LinkTask, link_metrics, split_links


def test_validation_scores_every_candidate_once_and_monitor_auroc_elects_best(
        tmp_path) -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    m = model(task)
    run = m.train(plan(task, x, n_epochs=2, val=True, metrics=task.metric_specs(),
                       monitor=MonitorSpec("auroc")),
                  root=tmp_path, verbose=False)
    val = run.epoch_records()[-1].val_edp
    expected = link_metrics(task.predict(m, task.loader("val", x, 5)).logits,
                            [int(t) for t in split.candidates()[1][split.candidate_ids("val")]],
                            from_logits=True)
    assert (val.kind, val.status, val.count) == ("link", "ok", len(split.candidate_ids("val")))
    assert val.metrics["auroc"] == expected.auroc and val.metrics["ap"] == expected.ap
    assert val.loss == expected.bce
    assert any((tmp_path / run.id).rglob("*best*"))


def test_a_one_class_validation_set_records_no_auroc_and_is_never_best(tmp_path) -> None:
    split, _, x = a_split(negatives=0)  # validation holds positives only
    task = LinkTask(split)
    run = model(task).train(plan(task, x, n_epochs=2, val=True,
                                 metrics=task.metric_specs(), monitor=MonitorSpec("auroc")),
                            root=tmp_path, verbose=False)
    val = run.epoch_records()[-1].val_edp
    assert "auroc" not in val.metrics and "ap" not in val.metrics and val.loss is not None
    assert not any((tmp_path / run.id).rglob("*best*"))


def test_predict_keeps_ids_pairs_logits_and_targets_aligned_in_candidate_order() -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    m = model(task)
    batches = list(task.loader("test", x, 4))
    forward = task.predict(m, batches)
    backward = task.predict(m, list(reversed(batches)))
    ids = split.candidate_ids("test")
    pairs, targets, _ = split.candidates()
    for p in (forward, backward):
        assert torch.equal(p.ids, ids) and torch.equal(p.pairs, pairs[:, ids])
        assert torch.equal(p.targets, targets[ids]) and p.logits.dtype == torch.float64
        assert torch.equal(p.probabilities, torch.sigmoid(p.logits))
    assert torch.equal(forward.logits, backward.logits)
    with torch.no_grad():
        direct = m.net(x, split.message_edge_index(), pairs[:, ids]).double()
    assert torch.equal(forward.logits, direct)


def test_a_pass_must_score_each_candidate_exactly_once_within_its_bound() -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    m = model(task)
    batches = list(task.loader("val", x, 4))
    step = task.eval_step()
    for loader, match in ((batches[1:], "exactly once"), ([*batches, batches[0]], "twice"),
                          (list(task.loader("train", x, 4)), "bound to their role")):
        with pytest.raises(LinkBatchError, match=match):
            step(SimpleNamespace(model=m, val_loader=loader))
    small = LinkTask(split, max_candidates=5)
    with pytest.raises(LinkBatchError, match="max_candidates=5"):
        small.predict(m, batches)


def test_an_edge_label_split_validates_over_its_categories(tmp_path) -> None:
    edge_index, x = graph(2)
    labels = (edge_index.min(0).values + edge_index.max(0).values) % 3
    split = split_links(edge_index, N, categories=("a", "b", "c"), labels=labels)
    task = LinkTask(split)
    m = model(task, categories=3)
    run = m.train(plan(task, x, val=True), root=tmp_path, verbose=False)
    val = run.epoch_records()[-1].val_edp
    assert set(val.metrics) == {"bce"} and val.count == len(split.candidate_ids("val"))
    prediction = task.predict(m, task.loader("val", x, 8))
    assert prediction.logits.shape == (val.count, 3)
    assert torch.allclose(prediction.probabilities.sum(1), torch.ones(val.count,
                                                                      dtype=torch.float64))
