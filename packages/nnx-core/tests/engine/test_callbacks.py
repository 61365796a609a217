"""The callback bus and the built-in listeners (spec §5, §6.1, §6.2)."""

from __future__ import annotations

import functools
import math
import warnings

import pytest
import torch
from _nnx_core_tiny import tiny_batches, tiny_model

from nnx import (
    Callback,
    CallbackContext,
    Checkpoints,
    Devices,
    EarlyStopping,
    LRMonitor,
    ModelCheckpoint,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNIterationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainParams,
)
from nnx._persistence.checkpoint import checkpoint_files, sidecar_path

B = 3  # microbatches per epoch


def loader(n_batches: int = B, size: int = 4, *, seed: int = 0):
    return tiny_batches(n_batches, size, seed=seed)


make_model = functools.partial(tiny_model, hidden=6)


def params(n_epochs: int = 3, *, val: bool = True, **kw) -> NNTrainParams:
    kw.setdefault("scheduler", None)
    return NNTrainParams(n_epochs=n_epochs, train_loader=loader(), optim=NNOptimParams.builder()
                         .sgd(max_lr=0.1).build(), val_loader=loader(1) if val else None, **kw)


def scripted(**fields):
    """An eval_step_fn reporting, per epoch, the i-th value of each given field list."""
    def evaluate(ctx):
        return NNEvaluationDataPoint(**{k: v[ctx.epoch_idx] for k, v in fields.items()})
    return evaluate


def last_epoch(run: NNRun) -> int:
    return NNCheckpoint.load(run.id, Checkpoints.LAST, root=run.root).epoch


# -- the bus ----------------------------------------------------------------------------------


def test_hooks_fire_in_order_with_the_context_filled_in(tmp_path):
    events: list[tuple] = []

    class Recorder(Callback):
        def on_train_begin(self, ctx):
            assert isinstance(ctx, CallbackContext)
            assert isinstance(ctx.optimizer, torch.optim.SGD)
            assert ctx.model.net is model.net and ctx.idp is None and len(ctx.idps) == 0
            assert (ctx.run.path / "run.yaml").is_file()  # the run is reserved
            events.append(("train_begin", ctx.run.id))

        def on_epoch_begin(self, ctx):
            events.append(("epoch_begin", ctx.epoch, len(ctx.idps)))

        def on_epoch_end(self, ctx):
            assert isinstance(ctx.idp, NNIterationDataPoint)
            assert ctx.idp is ctx.idps[-1] and ctx.idp.epoch == ctx.epoch
            assert ctx.idp.batch_idx == B - 1 and ctx.idp.val_edp is not None
            assert all(i.val_edp is None for i in ctx.idps[-B:-1])  # only the last carries it
            # on_epoch_end runs before the epoch commits (§4.2): LAST is still the previous
            # epoch's; a deferred action runs once the epoch is committed.
            assert ctx.epoch == 0 or last_epoch(ctx.run) == ctx.epoch - 1
            assert ctx.epoch > 0 or not (ctx.run.checkpoints_dir / "last.pt").exists()
            ctx.defer(lambda c: events.append(("committed", c.epoch, last_epoch(c.run))))
            events.append(("epoch_end", ctx.epoch, len(ctx.idps)))

        def on_train_end(self, ctx):
            events.append(("train_end", ctx.epoch, len(ctx.idps)))

        def on_optimizer_update(self, ctx, event):  # objective runs only
            events.append(("update",))

    model = make_model()
    run = model.train(params(2), callbacks=[Recorder()], root=tmp_path / "runs", verbose=False)
    assert events == [
        ("train_begin", run.id),
        ("epoch_begin", 0, 0), ("epoch_end", 0, B), ("committed", 0, 0),
        ("epoch_begin", 1, B), ("epoch_end", 1, 2 * B), ("committed", 1, 1),
        ("train_end", 1, 2 * B),
    ]


def test_callbacks_run_in_list_order_and_a_plain_function_gets_the_idps(tmp_path):
    order: list[str] = []
    received: list[list[NNIterationDataPoint]] = []

    class Named(Callback):
        def __init__(self, name):
            self.name = name

        def on_epoch_end(self, ctx):
            order.append(self.name)

    def plain(idps):
        order.append("fn")
        received.append(list(idps))

    run = make_model().train(params(2), callbacks=[Named("a"), plain, Named("b")],
                             root=tmp_path / "runs", verbose=False)
    assert order == ["a", "fn", "b"] * 2
    assert [len(r) for r in received] == [B, 2 * B]
    assert all(isinstance(i, NNIterationDataPoint) for i in received[-1])
    assert [i.iter_idx for i in received[-1]] == [i.iter_idx for i in run.idps]


def test_should_stop_ends_training_after_that_epoch(tmp_path):
    class StopAtOne(Callback):
        def on_epoch_end(self, ctx):
            if ctx.epoch == 1:
                ctx.should_stop = True

    run = make_model().train(params(5), callbacks=[StopAtOne()], root=tmp_path / "runs",
                             verbose=False)
    assert {i.epoch for i in run.idps} == {0, 1}
    assert last_epoch(run) == 1
    assert {i.epoch for i in NNRun.load(run.id, root=tmp_path / "runs").idps} == {0, 1}


class StopAtUpdate(Callback):
    def __init__(self, at: int) -> None:
        self.at = at
        self.seen: list[int] = []

    def on_train_begin(self, ctx):
        ctx.update_listeners.append(self.listen)

    def listen(self, ctx):
        self.seen.append(ctx.committed_updates)
        if ctx.committed_updates == self.at:
            ctx.stop_at_update = True


def test_a_mid_epoch_stop_at_update_discards_the_partial_epoch(tmp_path):
    root = tmp_path / "runs"
    stopper, ends = StopAtUpdate(at=B + 1), []

    class Ends(Callback):
        def on_epoch_end(self, ctx):
            ends.append(ctx.epoch)

    model = make_model()
    run = model.train(params(3), callbacks=[stopper, Ends()], root=root, verbose=False)
    assert stopper.seen == list(range(1, B + 2))  # stopped right after update B + 1
    assert ends == [0]  # the partial epoch is never committed
    assert last_epoch(run) == 0
    assert {i.epoch for i in run.idps} == {0}
    assert {i.epoch for i in NNRun.load(run.id, root=root).idps} == {0}
    assert max(NNCheckpoint.from_file(p).epoch
               for p in checkpoint_files(root / run.id / "checkpoints")) == 0
    # The live net keeps the partial epoch's update; LAST keeps the committed weights.
    last = NNCheckpoint.load(run.id, Checkpoints.LAST, root=root)
    assert any(not torch.equal(last.state_dict[k], v) for k, v in model.net.state_dict().items())


def test_a_stop_at_update_on_the_epochs_last_batch_commits_that_epoch(tmp_path):
    stopper = StopAtUpdate(at=2 * B)
    run = make_model().train(params(4), callbacks=[stopper], root=tmp_path / "runs",
                             verbose=False)
    assert last_epoch(run) == 1
    assert {i.epoch for i in run.idps} == {0, 1}


def test_a_stop_at_update_set_at_the_epoch_end_stops_at_that_boundary(tmp_path):
    class AtEnd(Callback):
        def on_epoch_end(self, ctx):
            ctx.stop_at_update = True

    run = make_model().train(params(4), callbacks=[AtEnd()], root=tmp_path / "runs",
                             verbose=False)
    assert last_epoch(run) == 0 and {i.epoch for i in run.idps} == {0}


# -- EarlyStopping ------------------------------------------------------------------------------


def test_early_stopping_default_picks_the_validation_error_and_keeps_it(tmp_path):
    stopper = EarlyStopping(patience=2)
    with pytest.warns(RuntimeWarning, match="val_edp.error") as caught:
        run = make_model().train(
            params(5), eval_step_fn=scripted(error=[0.5, None, 0.6, 0.7, 0.1],
                                             loss=[0.9, 0.1, 0.05, 0.01, 0.01]),
            callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.selected_monitor == "val_edp.error"
    # Epoch 1 has no error: it does not count; epochs 2 and 3 do, and the run stops.
    assert len([w for w in caught if "EarlyStopping" in str(w.message)]) == 1
    assert stopper.stopped_epoch == 3 and last_epoch(run) == 3
    assert stopper.best == 0.5


def test_early_stopping_default_falls_back_to_the_validation_loss(tmp_path):
    stopper = EarlyStopping(patience=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the rejected-NaN notice
        run = make_model().train(
            params(4), eval_step_fn=scripted(error=[math.nan, 0.1, 0.1, 0.1],
                                             loss=[0.4, 0.3, 0.35, 0.2]),
            callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.selected_monitor == "val_edp.loss"
    assert stopper.stopped_epoch == 2 and last_epoch(run) == 2


def test_early_stopping_refuses_max_without_a_monitor_and_unknown_keys():
    with pytest.raises(ValueError, match="explicit monitor"):
        EarlyStopping(mode="max")
    with pytest.raises(ValueError, match="MonitorSpec"):
        EarlyStopping(monitor="val_edp.accuracy")
    with pytest.raises(ValueError):
        EarlyStopping(patience=-1)
    with pytest.raises(ValueError):
        EarlyStopping(min_delta=math.nan)
    assert EarlyStopping(monitor="val_edp.loss", mode="max").mode == "max"  # explicit: fine


def test_a_missing_monitored_field_warns_once_and_never_counts(tmp_path):
    stopper = EarlyStopping(monitor="val_edp.loss", patience=0)
    with pytest.warns(RuntimeWarning, match="val_edp.loss") as caught:
        run = make_model().train(params(3, val=False), callbacks=[stopper],
                                 root=tmp_path / "runs", verbose=False)
    assert len([w for w in caught if "EarlyStopping" in str(w.message)]) == 1
    assert stopper.stopped_epoch is None and stopper.wait == 0
    assert last_epoch(run) == 2  # patience=0 would have stopped on any counted epoch


def test_nan_counts_as_no_improvement_and_patience_zero_reacts_at_once(tmp_path):
    stopper = EarlyStopping(monitor="val_edp.loss", patience=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        run = make_model().train(params(4), eval_step_fn=scripted(loss=[0.5, math.nan, 0.1, 0.1]),
                                 callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.stopped_epoch == 1 and last_epoch(run) == 1
    assert stopper.best == 0.5  # NaN never becomes the best


@pytest.mark.parametrize("fields", [{"loss": [math.nan] * 5},
                                    {"error": [math.nan] * 5, "loss": [math.inf] * 5}],
                         ids=["nan-loss", "nan-error-and-inf-loss"])
def test_the_default_monitor_stops_a_run_diverged_from_its_first_epoch(tmp_path, fields):
    stopper = EarlyStopping(patience=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run = make_model().train(params(5), eval_step_fn=scripted(**fields), callbacks=[stopper],
                                 root=tmp_path / "runs", verbose=False)
    # Every value is present but not finite: each epoch counts, so patience 2 ends epoch 1.
    assert stopper.stopped_epoch == 1 and last_epoch(run) == 1
    assert stopper.best is None and stopper.selected_monitor is None
    assert not [w for w in caught if "EarlyStopping" in str(w.message)]  # nothing is missing


def test_the_default_monitor_selects_the_first_finite_field_after_nan_epochs(tmp_path):
    stopper = EarlyStopping(patience=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the rejected-NaN notices
        make_model().train(params(4), eval_step_fn=scripted(loss=[math.nan, 0.5, 0.4, 0.3]),
                           callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.selected_monitor == "val_edp.loss" and stopper.best == 0.3
    assert stopper.stopped_epoch is None and stopper.wait == 0


@pytest.mark.parametrize(("patience", "stopped"), [(0, 1), (1, 1), (2, 2), (3, None)])
def test_patience_counts_consecutive_non_improving_epochs(tmp_path, patience, stopped):
    stopper = EarlyStopping(monitor="val_edp.loss", patience=patience, min_delta=0.05)
    # 0.48 is within min_delta of 0.5: not an improvement.
    run = make_model().train(params(4), eval_step_fn=scripted(loss=[0.5, 0.48, 0.6, 0.3]),
                             callbacks=[stopper], root=tmp_path / "runs", verbose=False)
    assert stopper.stopped_epoch == stopped
    assert last_epoch(run) == (3 if stopped is None else stopped)


def test_early_stopping_on_a_training_field(tmp_path):
    stopper = EarlyStopping(monitor="train_edp.loss", mode="max", patience=0)
    run = make_model().train(params(3, val=False), callbacks=[stopper], root=tmp_path / "runs",
                             verbose=False)
    # Training loss falls, so "max" sees no improvement after epoch 0.
    assert stopper.stopped_epoch == 1 and last_epoch(run) == 1


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


# -- ModelCheckpoint ------------------------------------------------------------------------------


def test_model_checkpoint_files_are_weights_only(tmp_path):
    root = tmp_path / "runs"
    saver = ModelCheckpoint(every_n_epochs=2)
    model = make_model()
    run = model.train(params(4), callbacks=[saver], root=root, verbose=False)
    assert saver.saved == ["custom_e1", "custom_e3"]
    for tag in saver.saved:
        path = root / run.id / "checkpoints" / f"{tag}.pt"
        checkpoint = NNCheckpoint.from_file(path)
        assert checkpoint.training_state_present is False
        assert checkpoint.training_state() is None
        assert not sidecar_path(path).exists()
    e3 = NNCheckpoint.from_file(root / run.id / "checkpoints" / "custom_e3.pt")
    assert e3.epoch == 3
    for key, value in model.net.state_dict().items():
        assert torch.equal(e3.state_dict[key], value)
    assert NNModel.from_checkpoint(e3).predict(loader(1)[0][0]).logits.shape == (4, 3)
    last = NNCheckpoint.load(run.id, Checkpoints.LAST, root=root)
    assert last.training_state_present is True  # in contrast: LAST carries training state
    with pytest.raises(ValueError):
        ModelCheckpoint(every_n_epochs=0)
    with pytest.raises(ValueError):
        ModelCheckpoint(prefix="../x")


def _runtime_model() -> NNModel:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    return NNModel(module=module, params=NNModelParams(device=Devices.CPU))


def test_a_safetensors_model_checkpoint_refuses_a_runtime_module_in_its_check():
    # §3.2: a portable save of a runtime module fails before any file or directory exists.
    from nnx import MissingModelFactoryError

    portable = ModelCheckpoint(format="safetensors")
    with pytest.raises(MissingModelFactoryError, match=(
            r"^ModelCheckpoint\(format='safetensors'\): a safetensors checkpoint is a portable "
            r"save, but this model wraps a runtime module \(torch\.nn\.modules\.container\."
            r"Sequential, reconstructible=False\)")):
        portable.check_model(_runtime_model())
    portable.check_model(make_model())  # a built-in net can be rebuilt
    ModelCheckpoint().check_model(_runtime_model())  # a pickle file is not a portable save
    Callback().check_model(_runtime_model())  # the base hook refuses nothing


@pytest.mark.parametrize("loop", ["model", "trainer"])
def test_a_runtime_modules_safetensors_model_checkpoint_is_refused_before_any_run_dir(
        tmp_path, loop):
    from nnx import MissingModelFactoryError, NNTrainerParams, Trainer, supervised_objective

    model = _runtime_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    callbacks = [ModelCheckpoint(format="safetensors")]
    with pytest.raises(MissingModelFactoryError, match="portable save"):
        if loop == "model":
            model.train(params(1), callbacks=callbacks, root=tmp_path / "runs", verbose=False)
        else:
            trainer_params = (NNTrainerParams.builder().n_epochs(1).train_loader(loader())
                              .optimizer("net", NNOptimParams()).build())
            Trainer(model).train(trainer_params, objective=supervised_objective(),
                                 callbacks=callbacks, root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())


def test_model_checkpoint_tags_do_not_collide_with_the_run_files(tmp_path):
    run = make_model().train(params(2), callbacks=[ModelCheckpoint()], root=tmp_path / "runs",
                             verbose=False)
    names = {p.name for p in (tmp_path / "runs" / run.id / "checkpoints").iterdir()}
    assert {"custom_e0.pt", "custom_e1.pt", "last.pt", "best.pt"} <= names


def test_a_stop_before_the_first_completed_epoch_leaves_no_last(tmp_path, capsys):
    root = tmp_path / "runs"
    run = make_model().train(params(3), callbacks=[StopAtUpdate(at=1)], root=root,
                             verbose=None)  # None still prints the closing line
    assert run.idps == []
    assert not (root / run.id / "checkpoints" / "last.pt").exists()
    assert list((root / run.id / "checkpoints").iterdir()) == []
    assert not (root / "best").exists()
    assert NNRun.load(run.id, root=root).idps == []
    assert capsys.readouterr().out.splitlines()[-1].startswith("Run saved to ")


def test_early_stopping_on_an_undeclared_metric_is_refused_before_any_run(tmp_path):
    import torch

    from nnx import EarlyStopping, MonitorSpec, NNModel, NNTrainParams

    model = NNModel(net_params=NNParams(input_dim=2, output_dim=2))
    batches = [(torch.randn(4, 2), torch.randint(0, 2, (4,)))]
    stop = EarlyStopping(monitor=MonitorSpec(metric="brier"))
    with pytest.raises(ValueError, match="brier"):
        model.train(NNTrainParams(n_epochs=1, train_loader=batches, val_loader=batches),
                    callbacks=[stop], verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_progress_bar_shows_epoch_loss_and_the_monitored_value(tmp_path, capsys):
    import torch

    from nnx import NNModel, NNTrainParams

    model = NNModel(net_params=NNParams(input_dim=2, output_dim=2))
    batches = [(torch.randn(4, 2), torch.randint(0, 2, (4,)))] * 3
    model.train(NNTrainParams(n_epochs=2, train_loader=batches, val_loader=batches),
                verbose=True, root=tmp_path / "runs")
    err = capsys.readouterr().err
    assert "epoch 2/2" in err and "loss " in err and "val_edp.error" in err
    model2 = NNModel(net_params=NNParams(input_dim=2, output_dim=2))
    model2.train(NNTrainParams(n_epochs=1, train_loader=batches), verbose=False,
                 root=tmp_path / "runs", salt="quiet")
    assert capsys.readouterr().err == ""


def test_on_train_end_runs_when_training_raises_with_the_error_on_the_context(tmp_path):
    import torch

    from nnx import Callback, NNModel, NNTrainParams

    seen = []

    class Closer(Callback):
        def on_train_end(self, ctx):
            seen.append(ctx.error)

    def broken_step(ctx):
        raise RuntimeError("boom")

    model = NNModel(net_params=NNParams(input_dim=2, output_dim=2))
    batches = [(torch.randn(4, 2), torch.randint(0, 2, (4,)))]
    with pytest.raises(RuntimeError, match="boom"):
        model.train(NNTrainParams(n_epochs=1, train_loader=batches),
                    train_step_fn=broken_step, callbacks=[Closer()], verbose=False,
                    root=tmp_path / "runs")
    assert len(seen) == 1 and isinstance(seen[0], RuntimeError)


# -- epoch_idx beside epoch (§6.2's name on every step context and record) ----------------------


def test_step_contexts_and_records_answer_epoch_idx_beside_epoch(tmp_path):
    import dataclasses

    from nnx import default_train_step
    from nnx.objectives.supervised import SupervisedObjective

    seen: list[tuple[str, int, int]] = []

    def step(ctx):
        seen.append(("train", ctx.epoch, ctx.epoch_idx))
        with pytest.raises(AttributeError):
            ctx.epoch_idx = 7  # read-only: ``epoch`` is the one field
        return default_train_step(ctx)

    def evaluate(ctx):
        seen.append(("eval", ctx.epoch, ctx.epoch_idx))
        return NNEvaluationDataPoint(loss=1.0)

    run = make_model().train(params(2), train_step_fn=step, eval_step_fn=evaluate,
                             root=tmp_path / "step", verbose=False)
    assert [s for s in seen if s[0] == "eval"] == [("eval", 0, 0), ("eval", 1, 1)]
    assert [s for s in seen if s[0] == "train"] == [("train", e, e) for e in (0, 1) for _ in
                                                    range(B)]
    assert [i.epoch_idx for i in run.idps] == [i.epoch for i in run.idps] == [0] * B + [1] * B
    idp = run.idps[-1]
    assert "epoch_idx" not in idp.state() and idp.state()["epoch"] == 1  # serialized once
    assert "epoch_idx" not in {f.name for f in dataclasses.fields(idp)}
    alias = type(idp).__dict__["epoch_idx"]
    assert isinstance(alias, property) and alias.fset is None  # read-only

    epochs: list[tuple[int, int]] = []

    class Recording(SupervisedObjective):  # the built-in objective, noting its context
        def __call__(self, ctx):
            epochs.append((ctx.epoch, ctx.epoch_idx))
            return super().__call__(ctx)

    recording = Recording()
    make_model().train(params(2, val=False), objective=recording, root=tmp_path / "obj",
                       verbose=False)
    assert epochs == [(e, e) for e in (0, 1) for _ in range(B)]
