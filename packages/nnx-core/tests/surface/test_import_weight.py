"""A fit imports what it uses (issue 38): ``import nnx; nnx.NNModel`` and a plain
``NNModel(...).train(NNTrainParams(...))`` load none of the modules of the features they
do not use (provenance, the Hub, ONNX export, streaming prediction and metrics,
prediction, fine-tuning, rebuilding from saved weights, resuming, DDP, the built-in
callbacks and objectives, the other built-in nets, the low-rank op); each loads when its
feature is first used, and works. Every check runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

#: Modules loaded on first use only. A module joining a fit's imports on purpose leaves
#: this list in the same change (tools/bench/import_weight.py --list shows what loads).
LAZY = (
    "nnx._engine.distributed",
    "nnx._engine.finetune",
    "nnx._engine.onnx_export",
    "nnx._engine.prediction",
    "nnx._engine.prediction_stream",
    "nnx._engine.streaming_metrics",
    "nnx._persistence.hub_format",
    "nnx._persistence.last_epoch",
    "nnx._persistence.leftovers",
    "nnx._persistence.owed_points",
    "nnx._persistence.resume_source",
    "nnx._surface.hub",
    "nnx._surface.model_rebuild",
    "nnx.bundles",
    "nnx.callbacks._scalars",
    "nnx.callbacks.early_stopping",
    "nnx.callbacks.lr_monitor",
    "nnx.callbacks.model_checkpoint",
    "nnx.callbacks.tensorboard",
    "nnx.callbacks.wandb",
    "nnx.nets._images",
    "nnx.nets.conv",
    "nnx.nets.moe",
    "nnx.nets.vit",
    "nnx.objectives.kd",
    "nnx.objectives.stream",
    "nnx.objectives.supervised",
    "nnx.objectives.teacher",
    "nnx.provenance._describe",
    "nnx.provenance._values",
    "nnx.provenance.attempt",
    "nnx.provenance.compare",
    "nnx.provenance.identity",
    "nnx.provenance.manifest",
    "nnx.provenance.reading",
    "nnx.provenance.record",
    "nnx.streaming",
    "nnx.transforms.low_rank",
)

_FIT = """\
import torch
from torch.utils.data import DataLoader, TensorDataset
from nnx import NNModel, NNOptimParams, NNParams, NNTrainParams
g = torch.Generator().manual_seed(0)
rows = TensorDataset(torch.randn(16, 4, generator=g), torch.randint(0, 3, (16,), generator=g))
loader = DataLoader(rows, batch_size=8)
model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)))
run = model.train(NNTrainParams(n_epochs=1, train_loader=loader, val_loader=loader,
                                optim=NNOptimParams.builder().adamw(max_lr=1e-3).build(),
                                seed=0), root=ROOT, verbose=False)
"""


def _loaded(code: str, tmp_path: Path) -> list[str]:
    """The nnx modules in ``sys.modules`` after ``code`` ran in a fresh interpreter."""
    script = (f"ROOT = {str(tmp_path)!r}\n{code}\nimport json, sys\n"
              "print(json.dumps(sorted(m for m in sys.modules if m.startswith('nnx'))))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


def test_import_nnx_and_nnmodel_loads_no_lazy_module(tmp_path: Path) -> None:
    loaded = _loaded("import nnx\nnnx.NNModel\n", tmp_path)
    assert "nnx._surface.model" in loaded
    assert sorted(set(LAZY) & set(loaded)) == []


def test_a_plain_fit_loads_no_lazy_module(tmp_path: Path) -> None:
    loaded = _loaded(_FIT + "assert run.committed_epoch() == 0\n", tmp_path)
    assert "nnx._engine.fit_loop" in loaded
    assert sorted(set(LAZY) & set(loaded)) == []


def test_each_feature_loads_its_modules_on_first_use_and_works(tmp_path: Path) -> None:
    uses = _FIT + """\
from nnx.provenance import ExperimentManifest, compare, read_provenance
from nnx.callbacks import (EarlyStopping, LRMonitor, ModelCheckpoint, TensorBoardCallback,
                           WandbCallback)
from nnx.objectives import FrozenTeacher, KDObjective, ObjectiveStream, supervised_objective
from nnx.transforms import LowRankLinear
from nnx.streaming import PredictionBatch
from nnx.nets import ConvNN, MoEFeedFwdNN, ViTNN
x = torch.randn(4, 4)
assert model.predict(x).classes.shape == (4,)
with model.iter_predict(loader) as stream:
    assert sum(len(batch.logits) for batch in stream) == 16
assert model.freeze("layers.0.*") and model.unfreeze("layers.0.*")
model.export_state_dict(ROOT + "/state.pt")
model.save_pretrained(ROOT + "/pretrained")
assert torch.equal(NNModel.from_pretrained(ROOT + "/pretrained").net(x), model.net(x))
again = NNModel.from_checkpoint(run.best_checkpoint())
assert torch.equal(again.net(x), model.net(x))
manifest = ExperimentManifest(task={"kind": "categorical", "num_outputs": 3},
                              labels=["a", "b", "c"], data={"train": "train-v1"},
                              objective={"id": "supervised", "version": 1}, config={})
traced = model.train(NNTrainParams(n_epochs=1, train_loader=loader,
                                   optim=NNOptimParams.builder().adamw(max_lr=1e-3).build(),
                                   seed=1), root=ROOT, verbose=False, provenance=manifest)
assert traced.provenance.fingerprint == manifest.fingerprint
assert read_provenance(traced.path).attempt.status == "completed"
assert compare(traced.path, manifest).differences == ()
assert run.provenance is None
more = model.train(NNTrainParams(n_epochs=1, train_loader=loader, resume_from_run_id=run.id,
                                 optim=NNOptimParams.builder().adamw(max_lr=1e-3).build(),
                                 seed=0), root=ROOT, verbose=False)
assert more.committed_epoch() == 1
"""
    loaded = _loaded(uses, tmp_path)
    # Not used here: DDP needs a launch, ONNX its extra, bundles their own tests.
    unused = ("nnx._engine.distributed", "nnx._engine.onnx_export", "nnx.bundles")
    lazy_used = {m for m in LAZY if m not in unused}
    assert sorted(lazy_used - set(loaded)) == []
