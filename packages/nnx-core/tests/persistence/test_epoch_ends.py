"""nnx.extend.epoch_ends: each epoch's last record, cut where the caller says, no
checkpoint opened (the reader nnx.comparison uses, spec §23)."""

from __future__ import annotations

import pickle

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import Devices, NNModel, NNModelParams, NNOptimParams, NNParams, NNRun, NNTrainParams
from nnx.extend import epoch_ends
from nnx.history import HistoryJournal

X = torch.randn(32, 3, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] > 0).long()


def _run(root, **fit):
    model = NNModel(NNParams(input_dim=3, output_dim=2, hidden_dims=(4,)),
                    NNModelParams(device=Devices.CPU))
    params = NNTrainParams(n_epochs=3, seed=0, scheduler=None,
                           optim=NNOptimParams.builder().sgd(max_lr=0.1).build(),
                           train_loader=DataLoader(TensorDataset(X, Y), batch_size=8),
                           val_loader=DataLoader(TensorDataset(X, Y), batch_size=16))
    return model.train(params, verbose=False, root=root, **fit)


def _refuse(*args, **kwargs):
    raise AssertionError("epoch_ends opened a checkpoint")


@pytest.mark.parametrize("journal", [False, True])
def test_each_epochs_last_record_up_to_the_given_epoch(tmp_path, journal, monkeypatch):
    extra = {"history": HistoryJournal(retention=2)} if journal else {}
    run = _run(tmp_path, **extra)
    expected = NNRun.load(run.id, root=tmp_path).epoch_records()
    monkeypatch.setattr(torch, "load", _refuse)
    monkeypatch.setattr(pickle, "load", _refuse)
    found = epoch_ends(tmp_path / run.id, None)
    assert [r.state() for r in found] == [r.state() for r in expected]
    assert [r.epoch for r in epoch_ends(tmp_path / run.id, 1)] == [0, 1]
    assert all(r.val_edp is not None for r in found)
    assert epoch_ends(tmp_path / "absent", None) == []
