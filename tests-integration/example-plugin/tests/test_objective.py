"""HuberObjective: the objective contract (Objective, LossTerm, ObjectiveResult), trained
through ``model.train(params, objective=...)`` on a model with no task."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("nnx.example_plugin", reason="nnx-example-plugin is not installed")

import torch
from _regression import regression_batches, regression_model

from nnx import Devices, Losses, NNModel, NNModelParams, NNParams
from nnx.example_plugin import HuberObjective
from nnx.extend import Objective
from nnx.testing import sgd, tiny_train_params, weights


def test_the_huber_loss_of_errors_half_and_two_is_0_8125(tmp_path: Path) -> None:
    # out = x exactly (one Linear, weight 1, bias 0): the errors are 0.5 and 2.0, so
    # Huber(delta=1) = (0.5 * 0.5**2 + (2.0 - 0.5)) / 2 = (0.125 + 1.5) / 2 = 0.8125.
    model = NNModel(net_params=NNParams(input_dim=1, output_dim=1, hidden_dims=()),
                    params=NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, device=Devices.CPU))
    linear = model.net.layers[0]
    with torch.no_grad():
        linear.weight.fill_(1.0)
        linear.bias.fill_(0.0)
    batch = (torch.tensor([[0.5], [2.0]]), torch.zeros(2, 1))
    run = model.train(tiny_train_params([batch], optim=sgd(lr=0.1)), root=tmp_path,
                      verbose=False, objective=HuberObjective())
    summary = run.epoch_records()[0].train_edp  # the one batch's record
    assert summary is not None and summary.loss == pytest.approx(0.8125)
    # The update stepped on the Huber gradient: d/dw = (0.5*0.5 + 1*2.0) / 2 = 1.125.
    assert float(linear.weight.detach()) == pytest.approx(1.0 - 0.1 * 1.125)


def test_an_objective_trains_a_model_without_a_task(tmp_path: Path) -> None:
    model = regression_model()
    before = weights(model)
    run = model.train(tiny_train_params(regression_batches(), n_epochs=2), root=tmp_path,
                      verbose=False, objective=HuberObjective(delta=0.5))
    assert len(run.epoch_records()) == 2
    assert any(not torch.equal(before[k], v) for k, v in weights(model).items())


def test_it_is_an_objective_and_validates_delta() -> None:
    assert isinstance(HuberObjective(), Objective)
    with pytest.raises(ValueError, match=r"HuberObjective\.delta"):
        HuberObjective(delta=0.0)
