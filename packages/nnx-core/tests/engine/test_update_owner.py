"""The epoch loop is composed, not subclassed (issue 25): NNModel.train and Trainer.train
each hand :class:`nnx._engine.fit_loop.FitLoop` an UpdateOwner, and an add-on drives the
same loop with an owner of its own through ``nnx.extend.run_fit_loop``."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest
import torch

import nnx
import nnx.extend as extend
from nnx import NNEvaluationDataPoint, NNTrainerParams, Trainer, build_optimizer
from nnx._engine.training import ModelStepOwner
from nnx._surface.trainer import TrainerOwner
from nnx.testing import sgd, tiny_batches, tiny_model, tiny_train_params, weights

SRC = Path(nnx.__file__).parent


class PlainSGDOwner:
    """A kind of run written from the protocol alone: one optimizer, its own step."""

    kind = "model"
    custom_step = True

    def __init__(self, params):
        self.params = params
        self.component = self.step
        self.batches = 0

    def build(self, loop):
        optimizer = build_optimizer(loop.model.net, self.params.optim)
        precision = extend.resolve_precision(loop.model.params, loop.model.device)
        slot = extend.OptimizerSlot(None, optimizer, self.params.optim, None)
        return extend.OwnerBuild(slots={None: slot}, precision=precision, scaler=None)

    def new_run(self, loop, salt, root):
        return nnx.NNRun(model_params=loop.model.params, net_params=loop.model.net_params,
                         train_params=self.params, salt=salt, transforms=loop.transforms,
                         root=root)

    def schedule_params(self):
        return []

    def run_batch(self, loop, batch, batch_idx, epoch, window):
        self.batches += 1
        return self.step(loop, batch)

    def step(self, loop, batch):
        x, y = batch
        optimizer = loop.primary.optimizer
        optimizer.zero_grad()
        loss = loop.model.loss_fn(loop.model.net(x), y)
        loss.backward()
        optimizer.step()
        loop.report_update(None)
        return NNEvaluationDataPoint(loss=float(loss.detach()))


def test_an_owner_written_from_the_protocol_trains_through_the_public_seam(tmp_path):
    model = tiny_model()
    params = tiny_train_params(tiny_batches(3), n_epochs=2)
    owner = PlainSGDOwner(params)
    assert isinstance(owner, extend.UpdateOwner)
    before = weights(model.net)
    run = extend.run_fit_loop(owner, model, params, verbose=False, root=str(tmp_path))
    assert owner.batches == 6
    assert (run.path / "checkpoints" / "last.pt").is_file()
    assert [i.update_count for i in nnx.NNRun.load(run.id, root=tmp_path).idps] == [
        1, 2, 3, 4, 5, 6]
    after = weights(model.net)
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_the_same_configuration_through_the_builtin_owner_addresses_the_same_run(tmp_path):
    """The owner decides how a batch runs, not what the run is: a plain-SGD owner's run of
    NNModel.train's configuration has NNModel.train's id."""
    params = tiny_train_params(tiny_batches(2))
    ours = extend.run_fit_loop(PlainSGDOwner(params), tiny_model(), params, verbose=False,
                               root=str(tmp_path / "a"))
    builtin = tiny_model().train(params, verbose=False, root=tmp_path / "b")
    assert ours.id == builtin.id


def test_an_object_that_is_not_an_owner_is_refused_before_anything_is_written(tmp_path):
    class Half:
        kind, custom_step, component = "model", True, None

        def build(self, loop):  # no new_run, schedule_params, run_batch
            raise AssertionError("never reached")

    model = tiny_model()
    before = weights(model.net)
    with pytest.raises(TypeError, match="needs an UpdateOwner"):
        extend.run_fit_loop(Half(), model, tiny_train_params(tiny_batches(2)),
                            root=str(tmp_path))
    assert list(tmp_path.iterdir()) == []
    after = weights(model.net)
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_both_entry_points_pass_their_owner_to_the_one_loop(tmp_path):
    params = tiny_train_params(tiny_batches(2))
    assert isinstance(ModelStepOwner(params, step_fn=None), extend.UpdateOwner)
    trainer_params = NNTrainerParams(optims={"a": sgd()}, train_loader=tiny_batches(2))
    owner = TrainerOwner(Trainer(tiny_model()), trainer_params, step_fn=lambda ctx: None,
                         objective=None)
    assert isinstance(owner, extend.UpdateOwner)
    assert (ModelStepOwner.kind, TrainerOwner.kind) == ("model", "trainer")


def _bases(path: Path) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            for base in node.bases:
                name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
                found.append((node.name, name))
    return found


def test_no_class_in_core_subclasses_the_loop():
    subclasses = [f"{p.relative_to(SRC)}: {cls}" for p in SRC.rglob("*.py")
                  for cls, base in _bases(p) if base == "FitLoop"]
    assert subclasses == []


def test_the_check_sees_a_subclass(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text("from nnx._engine import fit_loop\nclass L(fit_loop.FitLoop): pass\n")
    assert _bases(planted) == [("L", "FitLoop")]


def _loop_reads(module: Any, owner: str) -> set[str]:
    """The ``loop.<member>`` reads of ``owner``'s methods in ``module``'s source."""
    tree = ast.parse(Path(module.__file__).read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == owner)
    return {node.attr for node in ast.walk(cls) if isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == "loop"}


def test_the_owner_seam_is_exactly_what_the_two_owners_read():
    """LoopView offers what NNModel.train's and Trainer.train's owners read, no more: a
    member no owner reads is loop internals an add-on owner would come to depend on."""
    import nnx._engine.training as training
    import nnx._surface.trainer as trainer
    from nnx._engine.update_owner import LoopView

    read = _loop_reads(training, "ModelStepOwner") | _loop_reads(trainer, "TrainerOwner")
    offered = {name for name in (*LoopView.__annotations__, *vars(LoopView))
               if not name.startswith("_")}
    assert read == offered
