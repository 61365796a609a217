"""The whole-epoch training summary (spec §6.4): the default step weights each batch by
its denominator, a custom step by its count or batch size."""

from __future__ import annotations

import pytest
from _nnx_core_tiny import sgd
from _support.training_loop import chunks, data, make_model

from nnx import (
    MetricSpec,
    MonitorSpec,
    NNEvaluationDataPoint,
    NNTrainParams,
    default_train_step,
)

# -- the whole-epoch training summary --------------------------------------------------------


def test_the_default_steps_epoch_summary_weights_each_batch_by_its_denominator(tmp_path):
    x, y = data(12, seed=5)
    parts = chunks(x, y, [3, 5, 4])
    run = make_model().train(
        NNTrainParams(n_epochs=2, train_loader=parts, optim=sgd(0.2), metrics=[MetricSpec("nll")],
                      monitor=MonitorSpec(metric="loss", split="train"), scheduler=None),
        root=tmp_path / "runs", verbose=False)
    for epoch in (0, 1):
        records = [i for i in run.idps if i.epoch == epoch]
        assert all(i.train_summary is None for i in records[:-1])
        summary = records[-1].train_summary
        losses = [i.train_edp.loss for i in records]
        expected = sum(loss * n for loss, n in zip(losses, [3, 5, 4], strict=True)) / 12
        assert summary.loss == pytest.approx(expected, rel=1e-9)
        assert summary.loss != pytest.approx(sum(losses) / 3, rel=1e-6)  # not a mean of means
        assert summary.metrics["nll"] == pytest.approx(summary.loss, rel=1e-5)  # whole epoch
        assert records[-1].selection["value"] == pytest.approx(summary.loss)


def test_a_custom_steps_epoch_summary_weights_by_count_or_batch_size(tmp_path):
    x, y = data(12, seed=5)
    parts = chunks(x, y, [3, 5, 4])
    scripted = {0: [(1.0, None), (2.0, None), (3.0, None)], 1: [(0.5, 1), (1.0, 1), (2.0, 2)]}

    def step(ctx):
        default_train_step(ctx)
        loss, count = scripted[ctx.epoch][ctx.batch_idx]
        return NNEvaluationDataPoint(loss=loss, error=loss / 10, count=count)

    run = make_model().train(
        NNTrainParams(n_epochs=2, train_loader=parts, optim=sgd(),
                      monitor=MonitorSpec(metric="loss", split="train"), scheduler=None),
        train_step_fn=step, root=tmp_path / "runs", verbose=False)
    first, second = run.epoch_records()
    assert first.train_summary.loss == pytest.approx((3 + 10 + 12) / 12)
    assert first.train_summary.error == pytest.approx((3 + 10 + 12) / 120)
    assert second.train_summary.loss == pytest.approx((0.5 + 1 + 4) / 4)
    assert [r.selection["improved"] for r in (first, second)] == [True, True]
    assert run.best_checkpoint().epoch == 1
