"""Non-finite objective windows (spec §6.5): the skip and fail policies, an unknown policy,
and FP16's all-or-nothing window with a checkpointed scaler."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from _support.objectives import Linear1, engine_on

from nnx import (
    Callback,
    LossTerm,
    NNModel,
    NNModelParams,
    NNTrainParams,
    Objective,
    ObjectiveResult,
    Precision,
    supervised_objective,
)
from nnx._contracts.precision import ResolvedPrecision
from nnx._engine.update_engine import OptimizerSlot, UpdateEngine


# -- non-finite policies ------------------------------------------------------------
class Poisoned(Objective):
    """The supervised loss, NaN on batch ``bad`` of epoch 0."""

    def __init__(self, bad: int, policy: str) -> None:
        self.bad, self.inner = bad, supervised_objective()
        self.nonfinite = policy  # type: ignore[misc]

    def __call__(self, ctx):
        result = self.inner(ctx)
        if ctx.epoch == 0 and ctx.batch_idx == self.bad:
            term = result.terms[0]
            poisoned = LossTerm(term.name, term.numerator * float("nan"), term.denominator)
            return ObjectiveResult([poisoned], output=result.output, target=result.target)
        return result


def test_nonfinite_skip_drops_the_poisoned_window_and_the_run_continues(tmp_path):
    batches = tiny_batches(4)
    model = tiny_model()
    counts = []

    class Count(Callback):
        def on_epoch_end(self, ctx):
            counts.append(ctx.update_count)

    with pytest.warns(RuntimeWarning, match="update window is skipped"):
        run = model.train(NNTrainParams(n_epochs=2, train_loader=batches, optim=sgd()),
                          objective=Poisoned(1, "skip"), callbacks=[Count()], root=tmp_path,
                          verbose=False)
    assert counts == [3, 7]  # epoch 0 lost one of its four updates
    assert len(run.epoch_records()) == 2
    # The dropped window is replaced by nothing: epoch 0 trained as if batch 1 never was.
    skipped, reference = tiny_model(), tiny_model()
    with pytest.warns(RuntimeWarning, match="update window is skipped"):
        skipped.train(NNTrainParams(n_epochs=1, train_loader=batches, optim=sgd()),
                      objective=Poisoned(1, "skip"), root=tmp_path / "s", verbose=False)
    kept = [b for i, b in enumerate(batches) if i != 1]
    reference.train(NNTrainParams(n_epochs=1, train_loader=kept, optim=sgd()),
                    objective=supervised_objective(), root=tmp_path / "r", verbose=False)
    for a, b in zip(skipped.net.parameters(), reference.net.parameters(), strict=True):
        assert torch.equal(a, b)


def test_nonfinite_fail_raises_before_anything_is_stepped(tmp_path):
    model = tiny_model()
    before = copy.deepcopy(model.net.state_dict())
    with pytest.raises(FloatingPointError, match="non-finite loss term 'supervised'"):
        model.train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd()),
                    objective=Poisoned(0, "fail"), root=tmp_path, verbose=False)
    for k, v in model.net.state_dict().items():
        assert torch.equal(v, before[k])


def test_an_unknown_nonfinite_policy_is_refused():
    class Bad(Linear1):
        nonfinite = "ignore"

    with pytest.raises(ValueError, match=r"objective\.nonfinite"):
        engine_on(torch.nn.Parameter(torch.tensor(1.0)), Bad(), accumulate=1)


# -- FP16: the all-or-nothing window --------------------------------------------------
class Overflowing(Objective):
    def __init__(self):
        self.big = True

    def __call__(self, ctx):
        a, b = ctx.model.a, ctx.model.b
        k = 1e38 if self.big else 1.0
        return ObjectiveResult([LossTerm("t", a * k + b, 1.0)])


def test_fp16_overflow_in_one_optimizer_steps_none_of_them():
    a = torch.nn.Parameter(torch.tensor(1.0))
    b = torch.nn.Parameter(torch.tensor(1.0))
    slots = [OptimizerSlot("A", torch.optim.SGD([a], lr=1.0), sgd(1.0)),
             OptimizerSlot("B", torch.optim.SGD([b], lr=1.0), sgd(1.0))]
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    objective = Overflowing()
    events: list = []
    engine = UpdateEngine(model=SimpleNamespace(a=a, b=b), objective=objective, slots=slots,
                          precision=ResolvedPrecision(Precision.FP16, "cpu"), scaler=scaler,
                          accumulate=1, counter=SimpleNamespace(committed_updates=0),
                          on_commit=lambda evs, stepped: events.extend(evs))
    engine.microbatch(None, epoch=0, batch_idx=0, closes=True)
    assert (a.item(), b.item()) == (1.0, 1.0) and events == []  # B's finite grads not stepped
    assert scaler.get_scale() == 2.0**15  # a quiet skip: the scale backs off
    objective.big = False
    engine.microbatch(None, epoch=0, batch_idx=1, closes=True)
    assert (a.item(), b.item()) == (0.0, 0.0)
    assert [(e.optimizer, e.update_index) for e in events] == [("A", 1), ("B", 1)]


def test_fp16_objective_run_trains_with_a_checkpointed_scaler(tmp_path):
    model = NNModel(net_params=tiny_model().net_params,
                    params=NNModelParams(precision=Precision.FP16))
    run = model.train(NNTrainParams(n_epochs=2, train_loader=tiny_batches(2), optim=sgd()),
                      objective=supervised_objective(), root=tmp_path, verbose=False)
    from nnx import NNCheckpoint

    state = NNCheckpoint.load(run.id, "last", root=tmp_path).training_state()
    assert state["scaler"] is not None and state["precision"]["policy"] == "FP16"
