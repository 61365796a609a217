"""End to end: regression / multilabel tasks, reduced precision, and the run's views."""

from __future__ import annotations

import math
import warnings

import pytest
import torch

from nnx import (
    Losses,
    MetricSpec,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNTrainParams,
    Precision,
    TaskSpec,
)


def regression_batches(n: int = 4, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n * 8, 3, generator=g)
    y = torch.stack([x.sum(1), x[:, 0] - x[:, 1]], dim=1)
    return [(x[i:i + 8], y[i:i + 8]) for i in range(0, len(x), 8)]


def test_regression_task_trains_and_records_mse_without_classification_fields(tmp_path):
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(16,)),
                    params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR,
                                         task=TaskSpec.regression(2)))
    data = regression_batches()
    run = model.train(NNTrainParams(n_epochs=15, train_loader=data, val_loader=data,
                                    optim=NNOptimParams(max_lr=1e-2), scheduler=None,
                                    metrics=[MetricSpec("mae")]),
                      verbose=False, root=tmp_path / "runs")
    first, last = run.epoch_records()[0].val_edp, run.epoch_records()[-1].val_edp
    assert last.loss < first.loss / 3
    assert last.error is None and last.accuracy is None and last.kind == "regression"
    assert set(last.metrics) >= {"mse", "mae"} and last.metrics["mse"] == pytest.approx(last.loss)
    # BEST follows the loss (error is None) and the model reloads from it.
    best = run.best_checkpoint()
    assert best is not None and best.score == pytest.approx(
        min(r.val_edp.loss for r in run.epoch_records()))


def test_nan_regression_targets_are_masked_out_of_loss_and_metrics(tmp_path):
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2),
                    params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR,
                                         task=TaskSpec.regression(2)))
    x, y = regression_batches(1)[0]
    masked = y.clone()
    masked[:4, 1] = float("nan")
    record = model.evaluate([(x, masked)])
    with torch.no_grad():
        out = model.net(x)
    valid = ~torch.isnan(masked)
    expected = float(((out - masked)[valid] ** 2).mean())
    assert record.loss == pytest.approx(expected, rel=1e-5) and record.count == int(valid.sum())


def test_multilabel_task_trains_with_subset_and_element_accuracy(tmp_path):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 4, generator=g)
    y = torch.stack([(x[:, 0] > 0), (x[:, 1] > 0), (x[:, 0] + x[:, 1] > 0)], 1).float()
    data = [(x[i:i + 16], y[i:i + 16]) for i in range(0, 64, 16)]
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(16,)),
                    params=NNModelParams(loss=Losses.BINARY_CROSS_ENTROPY,
                                         task=TaskSpec.multilabel(3, threshold=0.5)))
    run = model.train(NNTrainParams(n_epochs=30, train_loader=data, val_loader=data,
                                    optim=NNOptimParams(max_lr=3e-2), scheduler=None),
                      verbose=False, root=tmp_path / "runs")
    val = run.epoch_records()[-1].val_edp
    assert val.kind == "multilabel" and val.accuracy is not None and val.accuracy > 0.8
    assert {"subset_accuracy", "element_accuracy"} <= set(val.metrics)
    assert val.metrics["element_accuracy"] >= val.metrics["subset_accuracy"]


@pytest.mark.parametrize("policy", [Precision.BF16, Precision.FP16])
def test_reduced_precision_trains_on_cpu(tmp_path, policy):
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(16,)),
                    params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, precision=policy,
                                         task=TaskSpec.regression(2)))
    dtypes = []
    model.net.layers[0].register_forward_hook(lambda m, i, o: dtypes.append(o.dtype))
    data = regression_batches()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's note on CPU autocast support
        run = model.train(NNTrainParams(n_epochs=10, train_loader=data, val_loader=data,
                                        optim=NNOptimParams(max_lr=1e-2), scheduler=None),
                          verbose=False, root=tmp_path / "runs")
    assert dtypes[0] == policy()  # the forward ran under autocast
    losses = [r.val_edp.loss for r in run.epoch_records()]
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    state = run.checkpoints_dir / "last.pt.opt.pt"
    saved = torch.load(state, weights_only=False)
    assert saved["precision"]["policy"] == policy.name
    assert (saved["scaler"] is not None) == (policy is Precision.FP16)


def test_str_and_html_views_of_a_run(tmp_path):
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2),
                    params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR,
                                         task=TaskSpec.regression(2)))
    data = regression_batches()
    run = model.train(NNTrainParams(n_epochs=3, train_loader=data, val_loader=data),
                      verbose=False, root=tmp_path / "runs", salt="views")
    text = str(NNRun.load(run.id, root=tmp_path / "runs"))
    assert f"run: {run.id}" in text and "salt: views" in text
    assert len([ln for ln in text.splitlines() if ln.strip()[:1].isdigit()]) == 3
    html = run._repr_html_()
    assert html.startswith("<div><table>") and "<svg" in html and "<polyline" in html
    assert html.count("<tr><td>") == 3  # one row per epoch
