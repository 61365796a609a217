"""LRMonitor (spec §5, §2.5): per-epoch history, update history on the update clock, and
the journal's retention."""

from __future__ import annotations

import pytest
from _support.callbacks import B, make_model, params

from nnx import (
    LRMonitor,
    NNSchedulerParams,
)

# -- LRMonitor ----------------------------------------------------------------------------------


def test_lr_monitor_history_per_epoch_and_update_history_on_the_update_clock(tmp_path):
    epoch_clock = LRMonitor()
    make_model().train(params(3, scheduler=NNSchedulerParams.builder().step(
        step_size=1, factor=0.5).build()), callbacks=[epoch_clock], root=tmp_path / "e",
        verbose=False)
    assert epoch_clock.history == pytest.approx([0.05, 0.025, 0.0125])
    assert epoch_clock.update_history == []

    update_clock = LRMonitor()
    make_model().train(params(2, scheduler=NNSchedulerParams.builder().step(
        step_size=2, factor=0.5).clock("optimizer_update").build()),
        callbacks=[update_clock], root=tmp_path / "u", verbose=False)
    assert len(update_clock.history) == 2
    assert [i for i, _ in update_clock.update_history] == list(range(1, 2 * B + 1))
    assert [lr for _, lr in update_clock.update_history] == pytest.approx(
        [0.1, 0.05, 0.05, 0.025, 0.025, 0.0125])
    assert update_clock.history == pytest.approx([0.05, 0.0125])

    # A fresh train() call starts fresh traces.
    make_model().train(params(1, scheduler=None), callbacks=[update_clock],
                       root=tmp_path / "n", verbose=False)
    assert update_clock.history == pytest.approx([0.1]) and update_clock.update_history == []


def test_lr_monitor_history_keeps_the_journals_retention_unless_unbounded(tmp_path):
    # §4.5: with a HistoryJournal, LRMonitor.history keeps the LRs of the last
    # `retention` epochs; LRMonitor(bounded=False) keeps every epoch.
    from nnx.history import HistoryJournal

    halving = NNSchedulerParams.builder().step(step_size=1, factor=0.5).build()
    every = [0.05, 0.025, 0.0125, 0.00625]
    bounded, unbounded, plain = LRMonitor(), LRMonitor(bounded=False), LRMonitor()
    make_model().train(params(4, scheduler=halving), callbacks=[bounded, unbounded],
                       history=HistoryJournal(retention=2, chunk_size=1),
                       root=tmp_path / "journal", verbose=False)
    assert type(bounded.history) is list and bounded.history == pytest.approx(every[-2:])
    assert unbounded.history == pytest.approx(every)
    make_model().train(params(4, scheduler=halving), callbacks=[plain],
                       root=tmp_path / "eager", verbose=False)
    assert plain.history == pytest.approx(every)  # no journal: nothing is bounded
    make_model().train(params(3, scheduler=halving), callbacks=[bounded],
                       root=tmp_path / "again", verbose=False)
    assert bounded.history == pytest.approx(every[:3])  # the bound is the run's, not sticky


@pytest.mark.parametrize("bad", ["no", 0, None])
def test_lr_monitor_refuses_a_non_bool_bounded(bad):
    with pytest.raises(ValueError, match=r"LRMonitor.bounded must be a bool"):
        LRMonitor(bounded=bad)
