"""The callback bus (spec §5, §6.2): hook order and context, list order, should_stop and
stop_at_update, on_train_end after an error, the progress bar, and epoch_idx beside epoch."""

from __future__ import annotations

import pytest
import torch
from _support.callbacks import B, last_epoch, make_model, params

from nnx import (
    Callback,
    CallbackContext,
    Checkpoints,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNIterationDataPoint,
    NNModel,
    NNParams,
    NNRun,
    NNTrainParams,
)
from nnx._persistence.checkpoint import checkpoint_files

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


def test_progress_bar_shows_epoch_loss_and_the_monitored_value(tmp_path, capsys):
    import torch


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

    from nnx import Callback

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
