"""streaming_eval_step (spec §21): the default validation record from counts and sums."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model, weights
from torch import nn

from nnx import EvalStepContext, NNTrainParams, TaskSpec
from nnx.metrics import MetricSpec, register_metric, unregister_metric
from nnx.streaming import UnboundedMetricError, streaming_eval_step

METRICS = (MetricSpec("accuracy"), MetricSpec("f1"), MetricSpec("nll"), MetricSpec("brier"))


def _val():
    # Uneven batches and masked targets: the loss must be Σ numerators / Σ weights.
    x = torch.randn(11, 4, generator=torch.Generator().manual_seed(3))
    y = torch.tensor([0, 1, 2, -100, 1, 0, 2, 2, -100, 1, 0])
    return [(x[:5], y[:5]), (x[5:9], y[5:9]), (x[9:], y[9:])]


def _train(tmp_path, name, eval_step_fn=None, *, task=None, loss=None):
    model = tiny_model(task=task)
    if loss is not None:
        model.loss_fn = loss
    params = NNTrainParams(n_epochs=2, train_loader=tiny_batches(3, 4), val_loader=_val(),
                           optim=sgd(0.3), scheduler=None, metrics=METRICS)
    run = model.train(params, eval_step_fn=eval_step_fn, root=tmp_path / name, verbose=False)
    return model, [r.val_edp for r in run.epoch_records()]


@pytest.mark.parametrize("task", [None, TaskSpec.categorical(3, ignore_index=-100)],
                         ids=["no task", "categorical task"])
def test_streaming_validation_records_equal_the_default_ones(tmp_path, task):
    model_a, eager = _train(tmp_path, "eager", task=task)
    model_b, streamed = _train(tmp_path, "streamed", streaming_eval_step, task=task)
    assert len(eager) == 2 and eager == streamed
    assert set(eager[-1].metrics) == {"accuracy", "f1", "nll", "brier"}
    assert all(torch.equal(v, weights(model_b)[k]) for k, v in weights(model_a).items())


def test_the_loss_is_summed_numerators_over_summed_weights_and_a_sum_loss_stays_a_total():
    model = tiny_model()
    ctx = EvalStepContext(model=model, val_loader=_val(), extra_metrics={}, epoch_idx=0)
    record = streaming_eval_step(ctx)
    x = torch.cat([b[0] for b in _val()])
    y = torch.cat([b[1] for b in _val()])
    with torch.no_grad():
        mean = nn.functional.cross_entropy(model.net(x), y).item()
    assert record.loss == pytest.approx(mean, rel=1e-6)  # not a mean of batch means
    model.loss_fn = nn.CrossEntropyLoss(reduction="sum")
    summed = streaming_eval_step(ctx)
    with torch.no_grad():
        total = nn.functional.cross_entropy(model.net(x), y, reduction="sum").item()
    assert summed.loss == pytest.approx(total, rel=1e-6)
    assert summed == model.evaluate(_val())


def test_an_empty_validation_loader_gives_the_empty_record_where_evaluate_raises():
    model = tiny_model(task=TaskSpec.categorical(3))
    ctx = EvalStepContext(model=model, val_loader=[], extra_metrics={}, epoch_idx=0)
    record = streaming_eval_step(ctx)
    assert (record.kind, record.count, record.status) == ("categorical", 0, "empty")
    with pytest.raises(ValueError, match="no batch"):
        model.evaluate([])


class _Keeps:
    """A rank-style metric: no merge(), so it stores every score."""

    def __init__(self, config):
        self.seen = []

    def update(self, target, prediction):
        self.seen.append(np.asarray(prediction))

    def result(self):
        return float(len(self.seen))


@pytest.fixture
def stored_metric():
    register_metric("keeps", 1, _Keeps, input="labels", mode="max")
    yield MetricSpec("keeps")
    unregister_metric("keeps", 1)


@pytest.mark.parametrize("step", [streaming_eval_step, functools.partial(streaming_eval_step)],
                         ids=["itself", "partial"])
@pytest.mark.parametrize("declare", ["extra_metrics", "stored metric"])
def test_refusals_come_before_any_run_is_reserved(tmp_path, step, declare, stored_metric):
    model = tiny_model()
    before = weights(model)
    fields = ({"extra_metrics": {"n": lambda t, p: len(t)}} if declare == "extra_metrics"
              else {"metrics": (MetricSpec("accuracy"), stored_metric)})
    params = NNTrainParams(n_epochs=1, train_loader=tiny_batches(), val_loader=_val(),
                           optim=sgd(), scheduler=None, **fields)
    match = "extra_metrics" if declare == "extra_metrics" else r"train.metrics\[1\]"
    with pytest.raises(UnboundedMetricError, match=match):
        model.train(params, eval_step_fn=step, root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(v, weights(model)[k]) for k, v in before.items())


class _Unread:
    """A validation loader that fails if a batch is ever read."""

    def __iter__(self):
        raise AssertionError("a validation batch was read")


def test_a_wrapping_step_refuses_at_its_first_call_before_reading_a_batch():
    def wrapper(ctx):
        return streaming_eval_step(ctx)

    ctx = EvalStepContext(model=tiny_model(), val_loader=_Unread(),
                          extra_metrics={"n": lambda t, p: len(t)}, epoch_idx=0)
    with pytest.raises(UnboundedMetricError, match="extra_metrics"):
        wrapper(ctx)


def test_every_problem_is_reported_with_its_path(stored_metric):
    from nnx._engine.evaluation import streaming_step_problems

    problems = streaming_step_problems({"n": len}, (stored_metric, MetricSpec("f1"),
                                                    stored_metric))
    assert [path for path, _ in problems] == ["train.extra_metrics", "train.metrics[0]",
                                              "train.metrics[2]"]
    assert streaming_step_problems({}, METRICS) == []


def test_a_class_weighted_loss_is_divided_by_the_summed_class_weights():
    """§21: the loss denominators are the class weights when the loss has them, so the
    record is the whole loader's weighted mean, not a mean of batch means."""
    model = tiny_model()
    weight = torch.tensor([0.2, 1.0, 3.0])
    model.loss_fn = nn.CrossEntropyLoss(weight=weight)
    ctx = EvalStepContext(model=model, val_loader=_val(), extra_metrics={}, epoch_idx=0)
    record = streaming_eval_step(ctx)
    x = torch.cat([b[0] for b in _val()])
    y = torch.cat([b[1] for b in _val()])
    with torch.no_grad():
        logits = model.net(x)
        weighted = nn.functional.cross_entropy(logits, y, weight=weight).item()
        batch_means = np.mean([nn.functional.cross_entropy(model.net(bx), by, weight=weight)
                               .item() for bx, by in _val()])
    assert record.loss == pytest.approx(weighted, rel=1e-6)
    assert record.loss != pytest.approx(batch_means, rel=1e-6)  # the check can fail
    assert record == model.evaluate(_val())


def test_without_a_task_multi_output_indicators_are_scored_row_by_row(tmp_path):
    """§21: a model without a task and a BCEWithLogitsLoss is scored as evaluate() scores
    it (exact-row accuracy); the streaming record equals the default one."""
    from nnx import Losses

    g = torch.Generator().manual_seed(5)
    x = torch.randn(12, 4, generator=g)
    y = (torch.rand(12, 3, generator=g) > 0.5).float()
    val = [(x[:5], y[:5]), (x[5:], y[5:])]
    records = []
    for name, step in (("eager", None), ("streamed", streaming_eval_step)):
        model = tiny_model(loss=Losses.BINARY_CROSS_ENTROPY)
        params = NNTrainParams(n_epochs=1, train_loader=val, val_loader=val, optim=sgd(0.3),
                               scheduler=None)
        run = model.train(params, eval_step_fn=step, root=tmp_path / name, verbose=False)
        records.append(run.epoch_records()[-1].val_edp)
    assert records[0] == records[1]
    with torch.no_grad():
        decided = (model.net(x) > 0).float()
    exact_rows = (decided == y).all(dim=1).float().mean().item()
    assert records[1].accuracy == pytest.approx(exact_rows)
