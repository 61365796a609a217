"""Objective runs' events, hooks and counters (spec §5, §6.5): on_optimizer_update events,
check_run, counters across a stateful resume, gradual unfreezing, unowned parameters."""

from __future__ import annotations

import warnings

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from _support.objectives import Linear1

from nnx import (
    Callback,
    NNOptimParams,
    NNParamGroupSpec,
    NNSchedulerParams,
    NNTrainParams,
    Objective,
    supervised_objective,
)


# -- events, hooks, counters ----------------------------------------------------------
class Recording(Objective):
    def __init__(self, log):
        self.log, self.inner = log, supervised_objective()

    def __call__(self, ctx):
        return self.inner(ctx)

    def check_run(self, model, *, optimizers, callbacks):
        self.log.append(("check_run", tuple(optimizers), len(callbacks)))

    def after_update(self, events):
        self.log.append(("after_update", events[0].update_count))


def test_events_hooks_and_update_counts(tmp_path):
    log: list = []

    class Listen(Callback):
        def on_optimizer_update(self, ctx, event):
            log.append(("event", event.update_count, ctx.update_count, event.epoch,
                        event.batch_idx, event.microbatches, event.update_index,
                        event.optimizer, ctx.optimizer.param_groups[0]["lr"]))

    schedule = NNSchedulerParams.builder().step(step_size=1, factor=0.5).clock(
        "optimizer_update").build()
    params = NNTrainParams(n_epochs=2, train_loader=tiny_batches(3), optim=sgd(0.4, 2),
                           scheduler=schedule)
    run = tiny_model().train(params, objective=Recording(log), callbacks=[Listen()],
                             root=tmp_path, verbose=False)
    assert log[0] == ("check_run", (None,), 1)
    events = [e for e in log if e[0] == "event"]
    # Windows of 2 + 1 microbatches: two updates per epoch, four in all.
    assert [e[1:8] for e in events] == [
        (1, 1, 0, 1, 2, 1, None), (2, 2, 0, 2, 1, 2, None),
        (3, 3, 1, 1, 2, 3, None), (4, 4, 1, 2, 1, 4, None)]
    # Each event fires before the update-clock schedule steps: it sees the update's own LR.
    assert [e[8] for e in events] == pytest.approx([0.4, 0.2, 0.1, 0.05])
    # after_update runs once per commit, before the callbacks see its events.
    order = [e[0] for e in log[1:]]
    assert order == ["after_update", "event"] * 4
    assert [r.update_count for r in run.idps] == [0, 1, 2, 2, 3, 4]


def test_check_run_refuses_before_any_run_is_reserved(tmp_path):
    class Refuse(Linear1):
        def check_run(self, model, *, optimizers, callbacks):
            raise ValueError("not with this model")

    with pytest.raises(ValueError, match="not with this model"):
        tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(1), optim=sgd()),
                           objective=Refuse(), root=tmp_path, verbose=False)
    assert not [p for p in tmp_path.iterdir() if not p.name.startswith(".")]


def test_a_stateful_resume_continues_the_update_counters_and_equals_the_whole_run(tmp_path):
    def params(n, **kw):
        return NNTrainParams(n_epochs=n, train_loader=tiny_batches(3), optim=sgd(0.3, 2),
                             seed=0, **kw)

    whole = tiny_model()
    whole_run = whole.train(params(4), objective=supervised_objective(), root=tmp_path / "w",
                            verbose=False)
    part = tiny_model()
    first = part.train(params(2), objective=supervised_objective(), root=tmp_path / "p",
                       verbose=False)
    resumed = tiny_model(seed=5)
    second = resumed.train(params(2, resume_from_run_id=first.id),
                           objective=supervised_objective(), root=tmp_path / "p",
                           verbose=False)
    for a, b in zip(whole.net.parameters(), resumed.net.parameters(), strict=True):
        assert torch.equal(a, b)
    assert second.idps[-1].update_count == whole_run.idps[-1].update_count == 8
    weights_only = tiny_model().train(
        params(1, resume_from_run_id=first.id, resume_mode="weights_only"),
        objective=supervised_objective(), root=tmp_path / "p", verbose=False)
    assert weights_only.idps[-1].update_count == 2


def test_gradual_unfreezing_trains_exactly_as_the_default_step(tmp_path):
    class Unfreeze(Callback):
        def on_train_begin(self, ctx):
            ctx.model.freeze("layers.0.*")

        def on_epoch_begin(self, ctx):
            if ctx.epoch == 1:
                ctx.model.unfreeze("*")

    runs = []
    for objective in (supervised_objective(), None):
        model = tiny_model()
        model.train(NNTrainParams(n_epochs=3, train_loader=tiny_batches(3), optim=sgd(0.2, 2)),
                    objective=objective, callbacks=[Unfreeze()],
                    root=tmp_path / str(len(runs)), verbose=False)
        runs.append(model)
    for a, b in zip(runs[0].net.parameters(), runs[1].net.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("objective", [None, supervised_objective()],
                         ids=["default step", "objective"])
def test_a_layer_frozen_before_train_trains_once_unfrozen_without_param_groups(tmp_path,
                                                                                objective):
    """§3.1 / §6.5: built without param_groups the optimizer holds every parameter, so a
    layer frozen at build time stays put while frozen and trains once a callback
    unfreezes it (was: left out of the optimizer, it never trained)."""
    class Unfreeze(Callback):
        def __init__(self):
            self.seen = []

        def on_epoch_begin(self, ctx):
            if ctx.epoch == 1:
                ctx.model.unfreeze("layers.0.*")

        def on_epoch_end(self, ctx):
            self.seen.append(ctx.model.net.layers[0].weight.detach().clone())

    model = tiny_model()
    model.freeze("layers.0.*")
    start = model.net.layers[0].weight.detach().clone()
    callback = Unfreeze()
    optim = NNOptimParams.builder().adamw(max_lr=0.1, weight_decay=0.5).build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train(NNTrainParams(n_epochs=3, train_loader=tiny_batches(2), optim=optim),
                    objective=objective, callbacks=[callback], root=tmp_path, verbose=False)
    frozen_epoch, first_unfrozen, _ = callback.seen
    assert torch.equal(frozen_epoch, start)  # no gradient, no decay: unchanged
    assert not torch.equal(first_unfrozen, start)
    assert not any("no optimizer owns" in str(w.message) for w in caught)


def test_a_parameter_no_optimizer_owns_warns_once_per_run(tmp_path):
    class Unfreeze(Callback):
        def on_epoch_begin(self, ctx):
            ctx.model.unfreeze("*")

    model = tiny_model()
    model.freeze("layers.0.*")
    optim = NNOptimParams.builder().sgd(max_lr=0.1).param_groups(
        [NNParamGroupSpec(name_pattern="*")]).build()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.train(NNTrainParams(n_epochs=3, train_loader=tiny_batches(2), optim=optim),
                    objective=supervised_objective(), callbacks=[Unfreeze()], root=tmp_path,
                    verbose=False)
    unowned = [w for w in caught if "no optimizer owns" in str(w.message)]
    assert len(unowned) == 1 and "layers.0.weight" in str(unowned[0].message)
