"""Helpers shared by the tests split out of engine/test_objectives.py."""

from __future__ import annotations

from types import SimpleNamespace

import torch
from _nnx_core_tiny import sgd

from nnx import LossTerm, Objective, ObjectiveContext, ObjectiveResult, Precision
from nnx._contracts.precision import ResolvedPrecision
from nnx._engine.update_engine import OptimizerSlot, UpdateEngine

FP32 = ResolvedPrecision(Precision.FP32, "cpu")


# -- the engine on one scalar parameter: the spec's numbers ---------------------------
class Linear1(Objective):
    """Term "t" = k · w with the batch's (k, count); count None makes it a sum."""

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        k, count = ctx.batch
        return ObjectiveResult([LossTerm("t", k * ctx.model.w, count)])


def engine_on(w: torch.Tensor, objective, *, accumulate: int, scaler=None, slots=None,
              precision=FP32):
    events: list = []
    counter = SimpleNamespace(committed_updates=0)
    model = SimpleNamespace(w=w)
    slots = slots or [OptimizerSlot(None, torch.optim.SGD([w], lr=1.0), sgd(1.0))]
    engine = UpdateEngine(model=model, objective=objective, slots=slots, precision=precision,
                          scaler=scaler, accumulate=accumulate, counter=counter,
                          on_commit=lambda evs, stepped: events.extend(evs))
    return engine, events, counter


def feed(engine, batches):
    records = []
    for i, batch in enumerate(batches):
        records.append(engine.microbatch(batch, epoch=0, batch_idx=i,
                                         closes=i == len(batches) - 1))
    return records
