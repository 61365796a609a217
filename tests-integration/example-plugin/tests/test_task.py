"""HuberTask: a task written from scratch against the Task protocol, handed to a plain
``NNModel(net_params=..., task=task)``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

pytest.importorskip("nnx.example_plugin", reason="nnx-example-plugin is not installed")

import torch
from _regression import regression_batches, regression_model
from torch.nn import functional

from nnx.example_plugin import HuberTask
from nnx.extend import Task
from nnx.testing import tiny_train_params, weights


def test_the_task_implements_the_protocol_and_inherits_nothing() -> None:
    task = HuberTask()
    assert isinstance(task, Task)
    assert HuberTask.__mro__ == (HuberTask, object)
    model = regression_model(task=task)
    assert type(model).__name__ == "NNModel" and model.task is task


def test_the_model_trains_on_the_task_s_objective(tmp_path: Path) -> None:
    batches = regression_batches(1)
    model = regression_model(task=HuberTask(delta=0.5))
    (x, y), before = batches[0], weights(model)
    with torch.no_grad():
        out = model.net(x)
    huber = float(functional.huber_loss(out, y, delta=0.5))
    run = model.train(tiny_train_params(batches), root=tmp_path, verbose=False)
    summary = run.epoch_records()[0].train_edp  # the one batch's record
    assert summary is not None and summary.loss == pytest.approx(huber, rel=1e-6)
    assert summary.loss != pytest.approx(float(functional.mse_loss(out, y)), rel=1e-3)
    assert any(not torch.equal(before[k], v) for k, v in weights(model).items())


def test_the_task_s_identity_enters_the_run_id_and_run_yaml(tmp_path: Path) -> None:
    params = tiny_train_params(regression_batches())
    bare = regression_model().train(params, root=tmp_path / "a", verbose=False)
    default = regression_model(task=HuberTask()).train(params, root=tmp_path / "b",
                                                       verbose=False)
    half = regression_model(task=HuberTask(delta=0.5)).train(params, root=tmp_path / "c",
                                                             verbose=False)
    assert len({bare.id, default.id, half.id}) == 3
    assert "task" not in bare.state()
    assert default.state()["task"] == {"kind": "example.huber"}  # the default delta: left out
    assert half.state()["task"] == {"kind": "example.huber", "delta": 0.5}
    again = regression_model(task=HuberTask(delta=0.5)).train(params, root=tmp_path / "d",
                                                              verbose=False)
    assert again.id == half.id


def test_model_predict_raises_the_task_s_refusal_before_a_forward() -> None:
    model = regression_model(task=HuberTask())
    calls: list[int] = []
    model.net.register_forward_hook(lambda *args: calls.append(1))
    with pytest.raises(ValueError, match="HuberTask predicts values, not classes"):
        model.predict(torch.zeros(2, 4))
    assert calls == []


def test_the_default_evaluate_path_is_accepted() -> None:
    model = regression_model(task=HuberTask())
    record = model.evaluate(regression_batches())
    assert record.loss is not None and math.isfinite(record.loss)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), True])
def test_delta_is_validated_by_the_core_validator(bad: float) -> None:
    with pytest.raises(ValueError, match=r"HuberTask\.delta"):
        HuberTask(delta=bad)
