"""Helpers shared by the tests split out of engine/test_callbacks.py."""

from __future__ import annotations

import functools

from _nnx_core_tiny import tiny_batches, tiny_model

from nnx import (
    Checkpoints,
    NNCheckpoint,
    NNOptimParams,
    NNRun,
    NNTrainParams,
)

B = 3  # microbatches per epoch


def loader(n_batches: int = B, size: int = 4, *, seed: int = 0):
    return tiny_batches(n_batches, size, seed=seed)


make_model = functools.partial(tiny_model, hidden=6)


def params(n_epochs: int = 3, *, val: bool = True, **kw) -> NNTrainParams:
    kw.setdefault("scheduler", None)
    return NNTrainParams(n_epochs=n_epochs, train_loader=loader(), optim=NNOptimParams.builder()
                         .sgd(max_lr=0.1).build(), val_loader=loader(1) if val else None, **kw)


def last_epoch(run: NNRun) -> int:
    return NNCheckpoint.load(run.id, Checkpoints.LAST, root=run.root).epoch
