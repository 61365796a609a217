"""extra_metrics on training batches (spec §20: "the loop computes them per batch (run.idps
has them)"; §6.3: fn(y_true, y_pred) on the valid targets only)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _nnx_core_tiny import sgd, tiny_model

from nnx import (
    NNTrainerParams,
    NNTrainParams,
    Trainer,
    default_train_step,
    supervised_objective,
)

X = torch.tensor([[0.5, -1.0, 2.0, 0.0], [1.0, 1.0, -1.0, 0.5], [-2.0, 0.3, 0.1, 1.0],
                  [0.0, 0.0, 1.0, -1.0], [1.5, -0.5, 0.0, 2.0]])
Y0 = torch.tensor([2, 0, 1, -100, 2])  # one masked row (CrossEntropyLoss's ignore_index)
Y1 = torch.tensor([1, 1, 0, 2, -100])
SEEN: list[tuple[np.ndarray, np.ndarray]] = []


def extra_metrics():
    SEEN.clear()

    def rows(y_true, y_pred):
        SEEN.append((np.asarray(y_true).copy(), np.asarray(y_pred).copy()))
        return len(y_true)

    return {"rows": rows, "label_sum": lambda t, p: int(np.sum(t)),
            "hits": lambda t, p: int(np.sum(np.asarray(t) == np.asarray(p)))}


def first_batch_hits() -> int:
    """Correct predictions of batch 0's valid rows under the initial weights (the record
    is of the forward before the update)."""
    with torch.no_grad():
        pred = tiny_model().net(X).argmax(1)
    valid = Y0 != -100
    return int((pred[valid] == Y0[valid]).sum())


@pytest.mark.parametrize("objective", [None, supervised_objective()],
                         ids=["default step", "objective"])
def test_each_training_batch_record_carries_the_extra_metrics(tmp_path, objective):
    params = NNTrainParams(n_epochs=1, train_loader=[(X, Y0), (X, Y1)], optim=sgd(0.5),
                           extra_metrics=extra_metrics())
    run = tiny_model().train(params, objective=objective, root=tmp_path, verbose=False)
    first, second = (idp.train_edp.extra for idp in run.idps)
    assert first == {"rows": 4.0, "label_sum": 5.0, "hits": float(first_batch_hits())}
    assert {k: second[k] for k in ("rows", "label_sum")} == {"rows": 4.0, "label_sum": 4.0}
    assert SEEN[0][0].tolist() == [2, 0, 1, 2]  # the masked row never reaches a metric


def test_a_batch_whose_every_target_is_masked_calls_no_metric(tmp_path):
    masked = torch.full((5,), -100)
    params = NNTrainParams(n_epochs=1, train_loader=[(X, Y0), (X, masked)], optim=sgd(),
                           scheduler=None,
                           extra_metrics=extra_metrics())
    run = tiny_model().train(params, root=tmp_path, verbose=False)
    assert run.idps[0].train_edp.extra["rows"] == 4.0
    assert run.idps[1].train_edp.extra == {} and len(SEEN) == 1


def test_without_extra_metrics_the_records_are_unchanged(tmp_path):
    params = NNTrainParams(n_epochs=1, train_loader=[(X, Y0)], optim=sgd())
    run = tiny_model().train(params, root=tmp_path, verbose=False)
    assert run.idps[0].train_edp.extra == {}


def test_a_custom_step_sees_the_runs_extra_metrics(tmp_path):
    """§8.3: a step function decides whether to score its batches; it gets the mapping."""
    seen = []

    def step(ctx):
        seen.append(sorted(ctx.extra_metrics))
        return default_train_step(ctx)

    params = NNTrainParams(n_epochs=1, train_loader=[(X, Y0)], optim=sgd(),
                           extra_metrics=extra_metrics())
    run = tiny_model().train(params, train_step_fn=step, root=tmp_path, verbose=False)
    assert seen == [["hits", "label_sum", "rows"]]
    assert run.idps[0].train_edp.extra["rows"] == 4.0  # default_train_step scored it


def test_a_trainer_objective_run_scores_its_batches_too(tmp_path):
    """Trainer's objective runs go through the same engine (§8.3, §20)."""
    params = (NNTrainerParams.builder().n_epochs(1).train_loader([(X, Y0), (X, Y1)]).seed(0)
              .optimizer("net", sgd(0.5)).extra_metrics(extra_metrics()).build())
    run = Trainer(tiny_model()).train(params, objective=supervised_objective(), verbose=False,
                                      root=tmp_path)
    first, second = (idp.train_edp.extra for idp in run.idps)
    assert first == {"rows": 4.0, "label_sum": 5.0, "hits": float(first_batch_hits())}
    assert (second["rows"], second["label_sum"]) == (4.0, 4.0)
