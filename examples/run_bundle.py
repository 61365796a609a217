"""Run bundles (spec §22): a run's checkpoint as data only, offline, in seconds.

* ``export_bundle(run_id, dir)`` publishes one checkpoint as a new generation of a
  bundle: weights and training state in safetensors, everything else strict JSON.
* The bundle is copied elsewhere (another machine, as far as NNx can tell),
  inspected and validated there without building a tensor or unpickling anything.
* ``reconstruct_bundle`` rebuilds a model that predicts bit for bit like the source,
  and ``.resume(params)`` continues the run: one resumed epoch equals the epoch the
  uninterrupted run trained.

    uv run python examples/run_bundle.py
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from nnx import (
    Devices,
    EarlyStopping,
    Losses,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
)
from nnx.bundles import export_bundle, inspect_bundle, reconstruct_bundle, validate_bundle

torch.manual_seed(0)
x = torch.randn(96, 4)
y = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 1).long()  # three classes
batches = [(x[i:i + 32], y[i:i + 32]) for i in range(0, 96, 32)]


def model() -> NNModel:
    torch.manual_seed(1)
    return NNModel(NNParams(input_dim=4, output_dim=3, hidden_dims=(16,)),
                   NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))


def params(n_epochs: int) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=batches, val_loader=batches, seed=0)


with tempfile.TemporaryDirectory() as tmp:
    here = Path(tmp)
    # 1. The uninterrupted run (3 epochs) and a run stopped after 2.
    full = model().train(params(3), callbacks=[EarlyStopping()], root=here / "runs",
                         verbose=False)
    first = model().train(params(2), callbacks=[EarlyStopping()], root=here / "train-box",
                          verbose=False)

    source = NNModel.from_checkpoint(NNCheckpoint.load(first.id, "last",
                                                       root=here / "train-box"))

    # 2. Export, then copy the bundle away from the run that wrote it.
    export_bundle(first.id, here / "bundle", root=here / "train-box")
    shutil.copytree(here / "bundle", here / "elsewhere")
    shutil.rmtree(here / "train-box")

    # 3. Read it as a stranger's: inspect (manifest + state.json), then validate.
    info = inspect_bundle(here / "elsewhere")
    print(f"bundle of run {info.source_run[:8]} at epoch {info.epoch}: {info.capability}, "
          f"net {info.net_params.input_dim}->{info.net_params.hidden_dims}->"
          f"{info.net_params.output_dim}, components {list(info.components)}")
    validate_bundle(here / "elsewhere")

    # 4. Rebuild: the model predicts exactly as the source checkpoint does.
    rebuilt = reconstruct_bundle(here / "elsewhere", components=[EarlyStopping()])
    equal = torch.equal(rebuilt.model.predict(x).logits, source.predict(x).logits)
    assert equal, "the rebuilt model predicts differently"
    print(f"rebuilt model predicts bit for bit like the source: {equal}")

    # 5. Resume one epoch: bit for bit the uninterrupted run's third epoch.
    resumed = rebuilt.resume(params(1), callbacks=[EarlyStopping()], root=here / "runs",
                             verbose=False)
    a = NNCheckpoint.load(full.id, "last", root=here / "runs").state_dict
    b = NNCheckpoint.load(resumed.id, "last", root=here / "runs").state_dict
    same = all(torch.equal(a[k], b[k]) for k in a)
    assert same, "the resumed epoch differs from the uninterrupted run"
    assert [r.state() for r in resumed.idps] == [r.state() for r in full.idps if r.epoch == 2]
    print(f"resumed from {resumed.resume_status.source_checkpoint}: weights and history equal "
          f"the uninterrupted run's: {same}")
