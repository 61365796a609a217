"""The spec's worked update window (§6.5 Objectives and the shared update engine):
numerators 8 and 1 over counts 2 and 1 average to 3; as sums they total 9."""

from __future__ import annotations

import pytest
import torch
from _support.objectives import Linear1, engine_on, feed


def test_numerators_8_and_1_over_counts_2_and_1_average_to_3():
    w = torch.nn.Parameter(torch.tensor(1.0))
    engine, events, counter = engine_on(w, Linear1(), accumulate=2)
    records = feed(engine, [(8.0, 2.0), (1.0, 1.0)])
    assert w.item() == pytest.approx(1.0 - 3.0)  # SGD lr=1: the gradient was exactly 3
    assert [r.loss for r in records] == [4.0, 1.0]  # each microbatch's own normalized loss
    assert len(events) == 1 and events[0].terms == {"t": 3.0}
    assert events[0].microbatches == 2 and events[0].update_count == counter.committed_updates == 1
    assert engine.epoch_loss() == 3.0


def test_numerators_8_and_1_as_sums_total_9():
    w = torch.nn.Parameter(torch.tensor(1.0))
    engine, events, _ = engine_on(w, Linear1(), accumulate=2)
    feed(engine, [(8.0, None), (1.0, None)])
    assert w.item() == pytest.approx(1.0 - 9.0)
    assert events[0].terms == {"t": 9.0}
