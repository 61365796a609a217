"""NLLLoss on logits (spec §6.3): an NLL model trains like cross-entropy from the same
weights."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _nnx_core_tiny import sgd
from _support.training_loop import chunks, data, make_model, weights

from nnx import (
    Losses,
    NNTrainParams,
)

# -- NLLLoss on logits --------------------------------------------------------------------


def test_nll_model_trains_like_cross_entropy_from_the_same_weights(tmp_path):
    x, y = data(12, seed=3)
    loader = chunks(x, y, [6, 6])
    ce, nll = make_model(seed=11), make_model(seed=11, loss=Losses.NEGATIVE_LOG_LIKELIHOOD)
    for key, value in weights(ce).items():
        assert torch.equal(value, weights(nll)[key])
    with torch.no_grad():
        expected_first = float(F.cross_entropy(ce.net(x[:6]), y[:6]))

    runs = []
    for model, name in ((ce, "ce"), (nll, "nll")):
        runs.append(model.train(NNTrainParams(n_epochs=2, train_loader=loader, val_loader=loader,
                                              optim=sgd(0.3), scheduler=None),
                                root=tmp_path / name, verbose=False))
    ce_run, nll_run = runs
    assert nll_run.idps[0].train_edp.loss == pytest.approx(expected_first, rel=1e-6)
    assert nll_run.idps[0].train_edp.loss > 0
    for a, b in zip(ce_run.idps, nll_run.idps, strict=True):
        assert b.train_edp.loss == pytest.approx(a.train_edp.loss, rel=1e-5)
    for key, value in weights(ce).items():
        torch.testing.assert_close(weights(nll)[key], value, atol=1e-6, rtol=1e-5)
    assert nll.evaluate(loader).loss == pytest.approx(ce.evaluate(loader).loss, rel=1e-5)
    assert nll.evaluate(loader).accuracy == ce.evaluate(loader).accuracy
