"""nnx.vis_utils.VisUtils (spec §12): training curves from a run and from its history
journal, the confusion matrix, the classification report (a DataFrame) and the t-SNE of
a checkpoint's logits; every figure passes Plotly's own JSON validation."""

from __future__ import annotations

import json

import numpy as np
import plotly.io as pio
import pytest
import torch
from _runs_tiny import monitored_run, trace

import nnx
from nnx.history import iter_history
from nnx.testing import tiny_batches
from nnx.vis_utils import GraphBatchRefusedError, LabelError, VisUtils


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    return tmp_path


def as_json(figure) -> dict:
    return json.loads(pio.to_json(figure, validate=True))


def test_visutils_is_a_top_level_name():
    from nnx.vis_utils.visutils import VisUtils as home

    assert nnx.VisUtils is home


def test_training_curves_hold_the_run_epochs():
    run = monitored_run(3)
    records = run.epoch_records()
    figure = as_json(VisUtils.training_curves(run.id, root="runs"))
    assert trace(figure, "train loss (whole epoch)")["y"] == [r.train_summary.loss
                                                             for r in records]
    assert trace(figure, "val error")["y"] == [r.val_edp.error for r in records]


def test_history_curves_read_every_record_of_the_journal():
    run = monitored_run(3, journal=True)
    records = list(iter_history(run.id))
    assert len(records) == 9 and len(run.idps) == 4  # the window is not the history
    figure = as_json(VisUtils.history_curves(run.id, root="runs"))
    assert trace(figure, "train loss (per record)")["y"] == [r.train_edp.loss for r in records]
    assert trace(figure, "val loss")["y"] == [r.val_edp.loss for r in records
                                              if r.val_edp is not None]


Y_TRUE = [0, 0, 1, 2, 2, 2, 1, 0, 3]
Y_PRED = [0, 1, 1, 2, 0, 2, 1, 0, 1]


def test_confusion_matrix_counts_true_rows_by_predicted_columns():
    figure = as_json(VisUtils.confusion_matrix(torch.tensor(Y_TRUE), np.array(Y_PRED)))
    z = np.array(figure["data"][0]["z"])
    expected = np.zeros((4, 4))
    for t, p in zip(Y_TRUE, Y_PRED, strict=True):
        expected[t, p] += 1
    assert (z == expected).all()
    rows = np.array(as_json(VisUtils.confusion_matrix(Y_TRUE, Y_PRED,
                                                      normalize="true"))["data"][0]["z"])
    assert np.allclose(rows.sum(axis=1), 1.0)


def test_classification_report_matches_scikit_learn():
    pytest.importorskip("pandas")  # the tabular extra: absent where nnx-viz is alone
    sklearn_metrics = pytest.importorskip("sklearn.metrics")
    report = VisUtils.classification_report(Y_TRUE, Y_PRED, target_names=list("abcd"))
    reference = sklearn_metrics.classification_report(
        Y_TRUE, Y_PRED, target_names=list("abcd"), output_dict=True, zero_division=0)
    for row in [*"abcd", "macro avg", "weighted avg"]:
        for column in ("precision", "recall", "f1-score", "support"):
            assert report.loc[row, column] == pytest.approx(reference[row][column]), row
    assert report.attrs["accuracy"] == pytest.approx(reference["accuracy"])


@pytest.mark.parametrize(("y_true", "y_pred"), [([0, 1], [0.2, 0.9]), ([0, 1, 2], [0, 1]),
                                                ([[0, 1]], [[0, 1]]), ([-1, 0], [0, 0])])
def test_labels_that_are_no_class_indices_are_refused(y_true, y_pred):
    with pytest.raises(LabelError):
        VisUtils.confusion_matrix(y_true, y_pred)
    pytest.importorskip("pandas")  # the tabular extra: absent where nnx-viz is alone
    with pytest.raises(LabelError):
        VisUtils.classification_report(y_true, y_pred)


def test_tsne_embeds_one_point_per_row_of_the_checkpoint_logits():
    pytest.importorskip("sklearn")
    run = monitored_run(1)
    points, figure = VisUtils.two_dim_tsne_checkpoint_logits(
        run.checkpoints_dir / "last.pt", tiny_batches(3), perplexity=5.0)
    assert points.shape == (12, 2) and np.isfinite(points).all()
    data = as_json(figure)["data"][0]
    assert data["x"] == pytest.approx(points[:, 0].tolist())
    labels = [int(y) for _, batch_y in tiny_batches(3) for y in batch_y]
    assert data["marker"]["color"] == labels
    again, _ = VisUtils.two_dim_tsne_checkpoint_logits(
        run.checkpoints_dir / "last.pt", tiny_batches(3), perplexity=5.0, max_samples=6)
    assert again.shape == (6, 2)


class FakeGraphBatch:
    """What nnx-graph's GraphBatch declares: a batch of whole graphs."""

    graph_level = True


def test_tsne_refuses_a_batch_of_whole_graphs_before_loading_weights():
    pytest.importorskip("sklearn")
    run = monitored_run(1)
    module = torch.nn.Sequential(torch.nn.Linear(4, 3))
    before = [p.detach().clone() for p in module.parameters()]
    with pytest.raises(GraphBatchRefusedError, match="whole graphs"):
        VisUtils.two_dim_tsne_checkpoint_logits(
            run.checkpoints_dir / "last.pt", [(FakeGraphBatch(), torch.zeros(2))],
            module=module)
    assert all(torch.equal(a, b) for a, b in zip(before, module.parameters(), strict=True))


def test_tsne_refuses_a_graph_collection_loader():
    pytest.importorskip("sklearn")
    collection = pytest.importorskip("nnx.graph_tasks.collection")  # nnx-graph, if here
    edges = torch.tensor([[0, 1], [1, 0]])
    graphs = collection.GraphCollection([(torch.randn(2, 4), edges), (torch.randn(2, 4), edges)],
                                        ids=[0, 1], targets=[0, 1])
    run = monitored_run(1)
    with pytest.raises(GraphBatchRefusedError, match="GraphBatch"):
        VisUtils.two_dim_tsne_checkpoint_logits(run.checkpoints_dir / "last.pt",
                                                graphs.loader(batch_size=2))


def test_tsne_puts_a_mixed_module_back_also_when_the_forward_raises():
    # §13.2 as nnx.viz's helpers keep it: the caller's module (given as module=) runs in
    # eval mode, and every submodule's own mode and requires_grad flag come back.
    pytest.importorskip("sklearn")
    from _viz_tiny import mixed

    from nnx import Losses, NNModel, NNModelParams
    from nnx.testing import tiny_train_params

    trained = NNModel(module=mixed(), params=NNModelParams(loss=Losses.CROSS_ENTROPY))
    run = trained.train(tiny_train_params(n_epochs=1), verbose=False)
    net = mixed()
    modes = {n: m.training for n, m in net.named_modules()}
    flags = {n: p.requires_grad for n, p in net.named_parameters()}
    points, _ = VisUtils.two_dim_tsne_checkpoint_logits(
        run.checkpoints_dir / "last.pt", tiny_batches(2), module=net, perplexity=3.0)
    assert points.shape == (8, 2)
    net.boom.armed = True
    with pytest.raises(RuntimeError, match="boom"):
        VisUtils.two_dim_tsne_checkpoint_logits(
            run.checkpoints_dir / "last.pt", tiny_batches(2), module=net, perplexity=3.0)
    assert {n: m.training for n, m in net.named_modules()} == modes
    assert {n: p.requires_grad for n, p in net.named_parameters()} == flags
