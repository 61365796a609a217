"""§20: a plan of epochs 0–3 stopped after epoch 1 (zero-based) and resumed with
resuming(first.run.id, mode="stateful", epochs="planned") trains epochs 2–3 and equals
the uninterrupted plan bit for bit."""

from __future__ import annotations

import hashlib
from pathlib import Path

import torch

from nnx import Callback, Devices, NNModelParams, NNParams, NNTrainParams
from nnx.plans import ExperimentPlan
from nnx.testing import sgd, tiny_batches, weights


class StopAfter(Callback):
    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_epoch_end(self, ctx) -> None:
        if ctx.epoch == self.epoch:
            ctx.should_stop = True


def records(run) -> list[tuple]:
    return [(i.epoch, i.iter_idx, i.update_count, i.lr, i.train_edp.loss,
             None if i.val_edp is None else i.val_edp.loss) for i in run.idps]


def digest(path: Path) -> dict[str, str]:
    return {str(p.relative_to(path)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def test_stopped_after_epoch_1_and_resumed_planned_equals_the_uninterrupted_plan(
        tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    optim = sgd(0.1)
    train = NNTrainParams(n_epochs=4, train_loader=tiny_batches(3),
                          val_loader=tiny_batches(2, seed=1), scheduler=None,
                          optim=optim)
    plan = ExperimentPlan(model=NNModelParams(device=Devices.CPU), train=train,
                          net=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)), seed=3)
    straight = plan.fit(verbose=False)
    first = plan.with_callbacks(StopAfter(1)).fit(verbose=False)
    assert [r.epoch for r in first.run.epoch_records()] == [0, 1]
    parent = digest(first.run.path)

    rest = plan.resuming(first.run.id, mode="stateful", epochs="planned").fit(verbose=False)

    assert [r.epoch for r in rest.run.epoch_records()] == [2, 3]
    assert records(rest.run) == [r for r in records(straight.run) if r[0] >= 2]
    for key, value in weights(straight.model).items():
        assert torch.equal(value, weights(rest.model)[key]), key
    assert rest.run.train_params.parent_run_id == first.run.id
    assert rest.run.resume_status.mode == "stateful"
    assert digest(first.run.path) == parent  # the parent's artifacts are untouched
    assert rest.metrics["val"].epoch == 3 and rest.metrics["val"].values == \
        straight.metrics["val"].values
