"""The default step's per-batch records compute their scores on first read (records.py).

A deferred record must be indistinguishable from the eager record with the
same values: reads, equality both ways, ``state()``, ``repr``, pickling,
copying and ``dataclasses.replace``. Its source is asked once, and only when a
deferred field is read.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

import pytest
import torch
from _nnx_core_tiny import tiny_batches, tiny_model
from torch import nn

from nnx import NNOptimParams, NNTrainParams, TaskSpec
from nnx._foundation.records import NNEvaluationDataPoint, deferred_record
from nnx.tasks import task_adapter

SCORES = {"error": 0.25, "accuracy": 0.75, "f1": 0.5, "recall": 0.625, "precision": 0.4375}


class CountingSource:
    def __init__(self) -> None:
        self.calls = 0

    def fields(self) -> dict[str, float]:
        self.calls += 1
        return dict(SCORES)


def eager() -> NNEvaluationDataPoint:
    return NNEvaluationDataPoint(loss=1.5, kind="categorical", count=8, status="ok", **SCORES)


def deferred(source: CountingSource | None = None) -> NNEvaluationDataPoint:
    return deferred_record(source or CountingSource(), loss=1.5, kind="categorical", count=8,
                           status="ok")


def test_the_source_is_asked_once_and_only_when_a_score_is_read() -> None:
    source = CountingSource()
    record = deferred(source)
    assert (record.loss, record.kind, record.status) == (1.5, "categorical", "ok")
    assert source.calls == 0
    assert record.f1 == 0.5
    assert (record.error, record.accuracy, record.recall, record.precision) == (
        0.25, 0.75, 0.625, 0.4375)
    assert source.calls == 1
    assert record.value("accuracy") == 0.75 and record.value("loss") == 1.5


def test_the_count_comes_from_the_source_when_it_gives_one() -> None:
    class WithCount(CountingSource):
        def fields(self) -> dict[str, float]:
            return {**super().fields(), "count": 6}

    record = deferred_record(WithCount(), loss=1.5, kind="categorical", count=None, status="ok")
    assert record.count == 6 and record.f1 == 0.5
    assert deferred().count == 8  # given up front, kept


def test_a_deferred_record_equals_the_eager_one_both_ways() -> None:
    assert deferred() == eager()
    assert eager() == deferred()
    assert deferred() != dataclasses.replace(eager(), f1=0.0)
    assert dataclasses.replace(eager(), f1=0.0) != deferred()
    assert isinstance(deferred(), NNEvaluationDataPoint)


def test_a_deferred_record_serializes_and_prints_as_the_eager_one() -> None:
    assert deferred().state() == eager().state()
    assert repr(deferred()) == repr(eager())
    for copied in (pickle.loads(pickle.dumps(deferred())), copy.deepcopy(deferred()),
                   copy.copy(deferred())):
        assert type(copied) is NNEvaluationDataPoint and copied == eager()


def test_replace_keeps_the_scores_and_changes_the_field() -> None:
    changed = dataclasses.replace(deferred(), extra={"aux": 2.0})
    assert changed.extra == {"aux": 2.0} and changed.f1 == 0.5
    assert changed == dataclasses.replace(eager(), extra={"aux": 2.0})
    with pytest.raises(dataclasses.FrozenInstanceError):
        changed.f1 = 0.0  # type: ignore[misc]


def test_a_deferred_record_is_frozen() -> None:
    record = deferred()
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.loss = 0.0  # type: ignore[misc]


@pytest.mark.parametrize("task", [None, TaskSpec.categorical(3)], ids=["default", "task"])
def test_the_default_steps_batch_record_is_deferred_and_equals_the_adapters(task) -> None:
    adapter = task_adapter(task, nn.CrossEntropyLoss())
    output = torch.randn(12, 3, generator=torch.Generator().manual_seed(0))
    target = torch.randint(0, 3, (12,), generator=torch.Generator().manual_seed(1))
    batch = adapter.training_batch(output.requires_grad_(), target, adapter.loss_fn,
                                   normalize=True)
    record = batch.record(batch.value)
    assert type(record) is not NNEvaluationDataPoint  # the cheap per-batch record
    assert record == adapter.record(output.detach(), target, loss=batch.value)


def test_a_trained_runs_records_are_settled_by_the_commit(tmp_path) -> None:
    model = tiny_model()
    run = model.train(NNTrainParams(n_epochs=2, train_loader=tiny_batches(), scheduler=None,
                                    optim=NNOptimParams.builder().sgd(max_lr=0.1).build()),
                      root=tmp_path, verbose=False)
    # idps.csv holds every score, so writing it computed them all.
    assert all(idp.train_edp._source is None for idp in run.idps)
    loaded = type(run).load(run.id, root=tmp_path)
    assert loaded.idps == run.idps


class DoubleBuffered:
    """Yields each batch in one of two reused tensor pairs, refilled in place: batch k+2
    overwrites batch k's tensors (the loop looks one batch ahead, so two buffers)."""

    def __init__(self, batches: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        self.batches = batches
        self.buffers = [(torch.empty_like(batches[0][0]), torch.empty_like(batches[0][1]))
                        for _ in range(2)]

    def __iter__(self):
        for k, (x, y) in enumerate(self.batches):
            bx, by = self.buffers[k % 2]
            bx.copy_(x)
            by.copy_(y)
            yield bx, by


def test_a_loader_refilling_an_earlier_batchs_tensors_keeps_that_batchs_record(tmp_path):
    batches = tiny_batches(n_batches=6, size=4, seed=3)
    params = NNTrainParams(n_epochs=2, train_loader=batches, scheduler=None,
                           optim=NNOptimParams.builder().sgd(max_lr=0.1).build())
    fresh = tiny_model().train(params, root=tmp_path / "a", verbose=False)
    reused = tiny_model().train(
        NNTrainParams(n_epochs=2, train_loader=DoubleBuffered(batches), scheduler=None,
                      optim=NNOptimParams.builder().sgd(max_lr=0.1).build()),
        root=tmp_path / "b", verbose=False)
    assert [i.train_edp for i in reused.idps] == [i.train_edp for i in fresh.idps]
    assert len({i.train_edp.accuracy for i in fresh.idps}) > 1  # the records differ by batch
