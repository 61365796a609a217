"""The update engine's window on one scalar parameter (spec §6.5): a term switching kind,
a fully masked window, a zero-weight term, and each term's own denominator."""

from __future__ import annotations

import pytest
import torch
from _support.objectives import Linear1, engine_on, feed

from nnx import (
    LossTerm,
    Objective,
    ObjectiveResult,
)


def test_a_term_switching_between_summed_and_normalized_in_a_window_fails():
    w = torch.nn.Parameter(torch.tensor(1.0))
    engine, _, _ = engine_on(w, Linear1(), accumulate=2)
    engine.microbatch((8.0, 2.0), epoch=0, batch_idx=0, closes=False)
    with pytest.raises(ValueError, match="switched from 'mean' to 'sum'"):
        engine.microbatch((1.0, None), epoch=0, batch_idx=1, closes=True)


def test_a_window_whose_every_term_is_masked_takes_no_update():
    w = torch.nn.Parameter(torch.tensor(1.0))
    engine, events, counter = engine_on(w, Linear1(), accumulate=2)
    feed(engine, [(0.0, 0.0), (0.0, 0.0)])
    assert w.item() == 1.0 and events == [] and counter.committed_updates == 0


class Exploding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        raise AssertionError("a term of weight 0 was back-propagated")


class TwoTerms(Objective):
    def __call__(self, ctx):
        w = ctx.model.w
        return ObjectiveResult([LossTerm("a", 2.0 * w, 1.0),
                                LossTerm("zero", Exploding.apply(w) * 5.0, 1.0, weight=0.0)])


@pytest.mark.parametrize("accumulate", [1, 2])
def test_a_term_of_weight_zero_is_never_back_propagated(accumulate):
    w = torch.nn.Parameter(torch.tensor(1.0))
    engine, events, _ = engine_on(w, TwoTerms(), accumulate=accumulate)
    feed(engine, [None] * accumulate)
    assert w.item() == pytest.approx(-1.0)
    assert events[0].terms["zero"] == 5.0  # still reported


class PerTermWindows(Objective):
    """Two normalized terms with different denominators per microbatch."""

    def __call__(self, ctx):
        w = ctx.model.w
        a_num, a_den, b_num, b_den = ctx.batch
        return ObjectiveResult([LossTerm("a", a_num * w, a_den),
                                LossTerm("b", b_num * w * w, b_den, weight=0.5)])


def test_each_term_is_normalized_by_its_own_summed_denominator():
    w = torch.nn.Parameter(torch.tensor(2.0))
    engine, events, _ = engine_on(w, PerTermWindows(), accumulate=2)
    feed(engine, [(3.0, 1.0, 4.0, 2.0), (5.0, 3.0, 2.0, 1.0)])
    # d/dw at w=2: a = (3 + 5) / (1 + 3) = 2; b = 0.5 · (4 + 2) · 2w / (2 + 1) = 4
    assert w.item() == pytest.approx(2.0 - 6.0)
    assert events[0].terms == {"a": (3.0 + 5.0) * 2.0 / 4.0, "b": (4.0 + 2.0) * 4.0 / 3.0}
