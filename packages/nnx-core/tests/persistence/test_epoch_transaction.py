"""The epoch transaction (spec §4.2, §5, §8.4, §14.1): on_epoch_end runs before the commit,
so LAST holds what the epoch's callbacks did; LAST is written again after on_train_end; a
run that fails before its first commit leaves no run directory behind (§4.4)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import (
    Callback,
    EarlyStopping,
    ModelCheckpoint,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNTrainerParams,
    NNTrainParams,
    Trainer,
    supervised_objective,
)
from nnx.components import ComponentSpec


def rising(ctx) -> NNEvaluationDataPoint:
    """A validation loss that only rises: 1, 2, 3, ... by epoch."""
    return NNEvaluationDataPoint(loss=float(ctx.epoch_idx + 1))


def plan(n_epochs: int, **kw) -> NNTrainParams:
    data = tiny_batches(2)
    base = dict(n_epochs=n_epochs, train_loader=data, val_loader=data, optim=sgd(),
                scheduler=None, seed=0)
    return NNTrainParams(**{**base, **kw})


def runs(root: Path) -> list[str]:
    """The run directories under ``root`` (not runs/best, not the lock folders)."""
    return sorted(p.name for p in root.iterdir()
                  if p.name != "best" and not p.name.startswith(".")) if root.exists() else []


def saved_components(run) -> dict:
    state = NNCheckpoint.load_training_state(run.id, root=run.root)
    assert state is not None
    return {name: entry["state"] for name, entry in state["components"].items()}


class RunningMean(Callback):
    """Spec §14.1's example component, counted at each epoch's end."""

    def __init__(self) -> None:
        self.mean, self.count = 0.0, 0

    def on_epoch_end(self, ctx):
        self.count += 1
        self.mean += (ctx.idp.train_edp.loss - self.mean) / self.count

    def component_spec(self):
        return ComponentSpec("my.running_mean", version=1)

    def component_state(self):
        return {"mean": self.mean, "count": self.count}

    def load_component_state(self, state, *, version):
        self.mean, self.count = state["mean"], state["count"]


# -- item 1: the committed epoch includes what its callbacks did -------------------------------


def test_a_run_split_at_an_epoch_boundary_stops_at_the_uninterrupted_runs_epoch(tmp_path):
    root = tmp_path / "runs"
    straight = EarlyStopping(monitor="val_edp.loss", patience=2)
    tiny_model().train(plan(6), eval_step_fn=rising, callbacks=[straight], root=root,
                       verbose=False)
    assert straight.stopped_epoch == 2

    first = tiny_model().train(plan(2), eval_step_fn=rising,
                               callbacks=[EarlyStopping(monitor="val_edp.loss", patience=2)],
                               root=root, verbose=False)
    assert saved_components(first)["early_stopping"]["wait"] == 1  # the live wait after epoch 1
    resumed = EarlyStopping(monitor="val_edp.loss", patience=2)
    rest = tiny_model().train(plan(4, resume_from_run_id=first.id, resume_mode="stateful"),
                              eval_step_fn=rising, callbacks=[resumed], root=root,
                              verbose=False)
    assert "early_stopping" in rest.resume_status.restored_components
    assert resumed.stopped_epoch == 2


def test_every_components_state_in_last_is_the_live_state_after_the_epochs_callbacks(tmp_path):
    stopper, mean = EarlyStopping(monitor="val_edp.loss", patience=5), RunningMean()
    seen: list[tuple[dict, dict]] = []

    class Probe(Callback):  # registered last: the other callbacks have run
        def on_epoch_end(self, ctx):
            live = {"wait": stopper.wait, "best": stopper.best, "mean": mean.mean,
                    "count": mean.count}
            ctx.defer(lambda c: seen.append((live, saved_components(c.run))))

    run = tiny_model().train(plan(3), eval_step_fn=rising, callbacks=[stopper, mean, Probe()],
                             root=tmp_path / "runs", verbose=False)
    assert [live["count"] for live, _ in seen] == [1, 2, 3]
    for live, saved in seen:
        assert saved["early_stopping"]["wait"] == live["wait"]
        assert saved["early_stopping"]["best"] == live["best"]
        assert saved["my.running_mean"] == {"mean": live["mean"], "count": live["count"]}
    # A resume continues the count where the run left it, not one short.
    again = RunningMean()
    tiny_model().train(plan(1, resume_from_run_id=run.id), callbacks=[again],
                       root=tmp_path / "runs", verbose=False)
    assert again.count == 4


class Zero(Callback):
    """on_train_end rewrites the net (as a post-training transform would)."""

    def on_train_end(self, ctx):
        with torch.no_grad():
            for p in ctx.model.net.parameters():
                p.fill_(0.25)


def _all_quarter(run) -> bool:
    last = NNCheckpoint.load(run.id, root=run.root)
    return all(torch.all(v == 0.25) for k, v in last.state_dict.items()
               if v.is_floating_point())


def test_the_final_last_carries_on_train_ends_change_to_the_net(tmp_path):
    run = tiny_model().train(plan(2), callbacks=[Zero()], root=tmp_path / "runs", verbose=False)
    assert _all_quarter(run)
    assert NNCheckpoint.load(run.id, root=run.root).epoch == 1  # the same committed epoch
    point = NNCheckpoint.verify(run.id, "last", root=run.root)
    assert point is not None and point.generation == 3  # epochs 0, 1, then the final write


def test_an_on_train_end_that_changes_nothing_leaves_the_epochs_last_as_the_final_one(
        tmp_path):
    class Look(Callback):
        def on_train_end(self, ctx):
            self.weights = {k: v.clone() for k, v in ctx.model.net.state_dict().items()}

    run = tiny_model().train(plan(2), callbacks=[Look()], root=tmp_path / "runs",
                             verbose=False)
    point = NNCheckpoint.verify(run.id, "last", root=run.root)
    assert point is not None and point.generation == 2  # one LAST per epoch, no rewrite


def test_the_trainers_final_last_carries_on_train_ends_change_to_the_net(tmp_path):
    params = (NNTrainerParams.builder().n_epochs(2).train_loader(tiny_batches(2))
              .optimizer("main", sgd()).build())
    run = Trainer(tiny_model()).train(params, objective=supervised_objective(),
                                      callbacks=[Zero()], root=tmp_path / "runs", verbose=False)
    assert _all_quarter(run)


def test_model_checkpoint_still_writes_after_the_commit_with_lasts_weights(tmp_path):
    order: list[str] = []

    def snapshot(ctx) -> Path:
        return ctx.run.checkpoints_dir / f"custom_e{ctx.epoch}.pt"

    class Change(Callback):  # after ModelCheckpoint in the list: its snapshot still sees it
        def on_epoch_end(self, ctx):
            with torch.no_grad():
                next(ctx.model.net.parameters()).add_(1.0)
            ctx.defer(lambda c: order.append(f"probe e{c.epoch}: custom={snapshot(c).exists()}"))

    saver = ModelCheckpoint()
    run = tiny_model().train(plan(2), callbacks=[saver, Change()], root=tmp_path / "runs",
                             verbose=False)
    assert saver.saved == ["custom_e0", "custom_e1"]
    assert order == ["probe e0: custom=True", "probe e1: custom=True"]  # in callback order
    custom = NNCheckpoint.from_file(run.checkpoints_dir / "custom_e1.pt")
    last = NNCheckpoint.load(run.id, root=run.root)
    assert all(torch.equal(custom.state_dict[k], v) for k, v in last.state_dict.items())


def test_a_callback_raising_at_epoch_0s_end_commits_nothing_and_the_retry_succeeds(tmp_path):
    root = tmp_path / "runs"

    class Boom(Callback):
        def on_epoch_end(self, ctx):
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        tiny_model().train(plan(2), callbacks=[Boom()], root=root, verbose=False)
    assert runs(root) == []  # no LAST, no run directory, no runs/best
    run = tiny_model().train(plan(2), root=root, verbose=False)
    assert runs(root) == [run.id]


# -- item 2: a failed first epoch releases its reservation -------------------------------------


def _bad_labels() -> list:
    return [(x, torch.full_like(y, 7)) for x, y in tiny_batches(2)]  # 3 classes: 7 is out


def _wrong_features() -> list:
    return [(torch.randn(4, 5), y) for _, y in tiny_batches(2)]  # the net takes 4 features


@pytest.mark.parametrize("broken", [_bad_labels, _wrong_features], ids=["labels", "features"])
def test_a_data_error_in_the_first_epoch_leaves_nothing_and_the_retry_succeeds(tmp_path,
                                                                               broken):
    root = tmp_path / "runs"
    good = plan(2)
    with pytest.raises((RuntimeError, IndexError, ValueError)):
        tiny_model().train(good.with_train_loader(broken()), root=root, verbose=False)
    assert runs(root) == []
    run = tiny_model().train(good, root=root, verbose=False)  # same run id: no RunExistsError
    assert runs(root) == [run.id]


def test_a_failure_after_the_first_commit_keeps_the_run(tmp_path):
    root = tmp_path / "runs"

    class Boom(Callback):
        def on_epoch_begin(self, ctx):
            if ctx.epoch == 1:
                raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        tiny_model().train(plan(2), callbacks=[Boom()], root=root, verbose=False)
    (run_id,) = runs(root)
    assert NNCheckpoint.load(run_id, root=root).epoch == 0


@pytest.mark.parametrize("field", ["train_loader", "val_loader"])
def test_a_loader_that_is_not_iterable_is_refused_before_any_reservation(tmp_path, field):
    root = tmp_path / "runs"
    model = tiny_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    with pytest.raises(TypeError, match=f"NNTrainParams.{field} must be an iterable of batches"
                                        ".*got int"):
        model.train(plan(2, **{field: 3}), root=root, verbose=False)
    assert not root.exists()
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())
    with pytest.raises(TypeError, match=r"NNTrainerParams\.train_loader must be an iterable"):
        trainer = (NNTrainerParams.builder().n_epochs(1).train_loader(3)
                   .optimizer("m", sgd()).build())
        Trainer(model).train(trainer, objective=supervised_objective(), root=root, verbose=False)
    assert not root.exists()


@pytest.mark.parametrize("field", ["train_loader", "val_loader"])
def test_a_loader_that_is_not_iterable_is_refused_when_the_params_are_built(field):
    # One place, at construction: the params never exist, so nothing can reserve a run.
    with pytest.raises(TypeError, match=f"^NNTrainParams.{field} must be an iterable of "
                                        r"batches \(a DataLoader or a list\); got int$"):
        plan(2, **{field: 3})
    good = plan(2)
    swap = good.with_train_loader if field == "train_loader" else good.with_val_loader
    with pytest.raises(TypeError, match=f"^NNTrainParams.{field} must be an iterable"):
        swap(3)  # a copy with another loader is checked the same way
