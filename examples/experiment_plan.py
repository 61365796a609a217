"""Experiment plans (spec §20): branch one configuration, validate it, probe it, fit it.

One base ExperimentPlan holds the net, model and training params, the data
(zero-argument factories, so every fit gets fresh loaders), the seed and the
callbacks. Branches are new plans; the base never changes. validate() lists
every problem of a broken branch at once, with its field path, without
iterating a loader or building a model. probe() runs one batch through a
temporary model and leaves the global RNG state as it found it. fit() equals
the imperative script ``set_seed(s); NNModel(...).train(NNTrainParams(seed=s))``,
and a plan stopped after epoch 1 and resumed with ``epochs="planned"`` ends
bit for bit where the uninterrupted plan ends.

    uv run python examples/experiment_plan.py
"""

from __future__ import annotations

import os
import tempfile

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import (
    Callback,
    Devices,
    LRMonitor,
    MetricSpec,
    MonitorSpec,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    set_seed,
)
from nnx.plans import ExperimentPlan

X = torch.randn(96, 4, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] + X[:, 1] > 0).long() + (X[:, 2] > 0.5).long()


def train_loader() -> DataLoader:
    return DataLoader(TensorDataset(X[:64], Y[:64]), batch_size=16, shuffle=True)


def val_loader() -> DataLoader:
    return DataLoader(TensorDataset(X[64:], Y[64:]), batch_size=32)


class StopAfter(Callback):
    """Simulates an interruption: ends training after the given epoch."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_epoch_end(self, ctx) -> None:
        if ctx.epoch == self.epoch:
            ctx.should_stop = True


def main() -> None:
    net = NNParams(input_dim=4, output_dim=3, hidden_dims=(16,))
    model = NNModelParams(device=Devices.CPU)
    train = NNTrainParams(n_epochs=4, optim=NNOptimParams.builder().sgd(max_lr=0.1).build(),
                          scheduler=None, metrics=(MetricSpec("accuracy"),))
    base = (ExperimentPlan(model=model, train=train, net=net, seed=0)
            .with_data(train_loader, val=val_loader, identity="toy-v1")
            .with_callback_factories(LRMonitor))

    # 1. Branches are new plans; what a method is not given is kept.
    wide = base.with_net(NNParams(input_dim=4, output_dim=3, hidden_dims=(64,)))
    monitored = base.with_metrics(monitor=MonitorSpec(metric="accuracy"))
    assert base.net.hidden_dims == (16,) and wide.data == base.data
    assert monitored.train.metrics == base.train.metrics and base.train.monitor is None

    # 2. validate(): every problem of a broken branch, with its path, in one call.
    broken = (monitored.with_data(torch.zeros(8, 4), val=None)
              .with_callbacks(lambda: None).resuming("some-run", mode="weights_only",
                                                      epochs="planned"))
    for diagnostic in broken.validate():
        print(f"  {diagnostic.path}: {diagnostic.message[:72]}")
    assert broken.validate().paths == ("data.train", "train.monitor", "resume.run_id",
                                       "resume.epochs", "callbacks[0]")  # no run "some-run"
    assert base.validate().ok

    # 3. probe(): a temporary model, one batch, the ambient RNG state restored.
    before = torch.get_rng_state()
    probed = base.probe((X[:5], Y[:5]))
    assert torch.equal(torch.get_rng_state(), before)
    print(f"probe: output {probed.output_shape}, loss {probed.loss:.4f}")

    with tempfile.TemporaryDirectory() as root:
        os.chdir(root)  # runs go under <cwd>/runs, as with NNModel.train

        # 4. fit() takes the steps of the equally seeded script.
        fitted = base.fit(verbose=False)
        set_seed(0)
        script = NNModel(net, model)
        run = script.train(NNTrainParams(
            n_epochs=4, optim=train.optim, scheduler=None, metrics=train.metrics, seed=0,
            data_id="toy-v1", train_loader=train_loader(), val_loader=val_loader()),
            verbose=False)
        for key, value in script.net.state_dict().items():
            assert torch.equal(value, fitted.model.net.state_dict()[key]), key
        assert [i.train_edp.loss for i in run.idps] == [
            i.train_edp.loss for i in fitted.run.idps]
        val = fitted.metrics["val"]
        print(f"fit: run {fitted.run.id}, val accuracy {val.values['accuracy']:.3f} "
              f"at epoch {val.epoch}")

        # 5. Every fit is a new attempt: a new run id and directory.
        again = base.fit(verbose=False)
        assert again.run.id != fitted.run.id and again.attempt_id != fitted.attempt_id

        # 6. Stop after epoch 1, resume the planned horizon: bit for bit the same.
        first = base.with_callbacks(StopAfter(1)).fit(verbose=False)
        rest = base.resuming(first.run.id, mode="stateful", epochs="planned").fit(
            verbose=False)
        assert [r.epoch for r in rest.run.epoch_records()] == [2, 3]
        for key, value in fitted.model.net.state_dict().items():
            assert torch.equal(value, rest.model.net.state_dict()[key]), key
        print(f"resumed run {rest.run.id} (parent {rest.run.train_params.parent_run_id}) "
              "equals the uninterrupted plan")
        os.chdir(os.path.dirname(root))


if __name__ == "__main__":
    main()
