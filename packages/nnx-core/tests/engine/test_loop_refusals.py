"""The loop's refusals leave nothing on disk (spec §4, §4.1, §6.3): no run directory is
reserved, and an existing run is left byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _nnx_core_tiny import sgd
from _support.training_loop import _loader, make_model, weights

from nnx import (
    Devices,
    Losses,
    MetricSpec,
    MonitorSpec,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    RunExistsError,
    TaskSpec,
    default_train_step,
)


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


def _refused(tmp_path: Path, model: NNModel, call, error: type[BaseException], match: str):
    before = weights(model)
    with pytest.raises(error, match=match):
        call()
    assert not (tmp_path / "runs").exists()
    assert list(tmp_path.iterdir()) == []
    for key, value in weights(model).items():
        assert torch.equal(value, before[key])


def test_refusals_reserve_no_run_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = make_model()
    base = NNTrainParams(n_epochs=1, train_loader=_loader(), optim=sgd(), scheduler=None)

    def train(params=base, **kw):
        return lambda: model.train(params, verbose=False, **kw)

    _refused(tmp_path, model, train(NNTrainParams(n_epochs=1, optim=sgd())), ValueError,
             "train_loader")
    _refused(tmp_path, model, train(sgd()), TypeError, "NNTrainParams")
    _refused(tmp_path, model, train({"n_epochs": 1}), TypeError, "NNTrainParams")
    _refused(tmp_path, model, train(callbacks=[42]), TypeError, "callbacks")
    _refused(tmp_path, model, train(salt=""), ValueError, "salt")
    _refused(tmp_path, model, train(salt=1), TypeError, "salt")
    _refused(tmp_path, model, lambda: model.train(
        NNTrainParams(n_epochs=1, train_loader=_loader(), metrics=[MetricSpec("no_such_metric")],
                      scheduler=None), verbose=False), ValueError, "no_such_metric")
    _refused(tmp_path, model, lambda: model.train(
        NNTrainParams(n_epochs=1, train_loader=_loader(), monitor=MonitorSpec(metric="loss"),
                      scheduler=None), verbose=False), ValueError, "val_loader")
    custom_monitor = NNTrainParams(
        n_epochs=1, train_loader=_loader(), metrics=[MetricSpec("nll")],
        monitor=MonitorSpec(metric="nll", split="train"), scheduler=None)
    _refused(tmp_path, model, lambda: model.train(
        custom_monitor, train_step_fn=lambda ctx: default_train_step(ctx), verbose=False),
        ValueError, "default training step")
    # ... while the default step may monitor a declared training metric.
    model.train(custom_monitor, verbose=False)
    assert (tmp_path / "runs").is_dir()


def test_an_nll_loss_with_a_regression_task_is_refused(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"NEGATIVE_LOG_LIKELIHOOD|NLLLoss|regression"):
        NNModel(net_params=NNParams(input_dim=4, output_dim=1),
                params=NNModelParams(device=Devices.CPU, loss=Losses.NEGATIVE_LOG_LIKELIHOOD,
                                     task=TaskSpec.regression(1)))
    assert list(tmp_path.iterdir()) == []


def test_an_existing_run_is_refused_and_left_byte_for_byte(tmp_path):
    root = tmp_path / "runs"
    params = NNTrainParams(n_epochs=2, train_loader=_loader(), val_loader=_loader(), optim=sgd(),
                           scheduler=None)
    first = make_model().train(params, root=root, verbose=False)
    before = files_of(root)
    assert f"{first.id}/run.yaml" in before and f"{first.id}/checkpoints/last.pt" in before
    again = make_model(seed=5)
    with pytest.raises(RunExistsError, match=first.id):
        again.train(params, root=root, verbose=False)
    assert files_of(root) == before
    assert sorted(p.name for p in root.iterdir() if not p.name.startswith(".")) == sorted(
        ["best", first.id])
