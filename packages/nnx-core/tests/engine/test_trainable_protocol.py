"""The engine's TrainableModel protocol, the training forward the step contexts carry
(ctx.train_net / ctx.forward, never an attribute on the model), and transforms that
return the recipes instead of recording them on the model (issue 14)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import nnx.extend as extend
from nnx import (
    LossTerm,
    NNEvaluationDataPoint,
    NNModel,
    NNTrainerParams,
    ObjectiveContext,
    ObjectiveResult,
    Trainer,
    TrainerStepContext,
    TrainStepContext,
    TransformRecipe,
    default_train_step,
    supervised_objective,
)
from nnx._contracts.precision import ResolvedPrecision
from nnx._contracts.trainable import TrainableModel, step_model
from nnx._engine.steps import UpdateWindow
from nnx.enums.precision import Precision
from nnx.testing import sgd, tiny_batches, tiny_model, tiny_train_params, weights
from nnx.transforms import apply_transform, replay_transforms

FP32 = ResolvedPrecision(Precision.FP32, "cpu")


class Spy(nn.Module):
    """Stands in for the DDP wrapper: calls the net and counts the calls."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.module = net
        self.calls = 0

    def forward(self, *args: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        out: torch.Tensor = self.module(*args)
        return out


def step_ctx(model: TrainableModel, train_net: nn.Module | None = None) -> TrainStepContext:
    optimizer = torch.optim.SGD(model.net.parameters(), lr=0.1)
    return TrainStepContext(model=model, batch=tiny_batches()[0], batch_idx=0, epoch=0,
                            optimizer=optimizer, precision=FP32, scaler=None,
                            grad_clip_norm=None, accumulate_grad_batches=1,
                            window=UpdateWindow(size=1, closes=True), train_net=train_net)


# -- the protocol -------------------------------------------------------------------------
def test_nnmodel_is_a_trainable_model_with_every_member():
    model: TrainableModel = tiny_model()  # the typed assignment mypy checks in nnx itself
    members = {n for n, v in vars(TrainableModel).items()
               if not n.startswith("__") and (isinstance(v, property) or callable(v))}
    assert members == {"net", "device", "loss_fn", "task_runtime", "task_adapter", "params",
                       "net_params", "transforms", "split_batch", "forward_raw", "evaluate",
                       "_build_scheduler"}  # minimal: a new member is a deliberate change
    for name in members:
        assert hasattr(model, name), name
    assert extend.TrainableModel is TrainableModel


def test_the_model_holds_no_ddp_forward_and_forward_raw_takes_the_net_to_call():
    model = tiny_model()
    assert not hasattr(model, "_train_forward")
    spy = Spy(model.net)
    inputs, _ = model.split_batch(tiny_batches()[0])
    assert torch.equal(model.forward_raw(inputs, net=spy), model.forward_raw(inputs))
    assert spy.calls == 1


def test_step_model_is_the_model_itself_without_a_wrapper():
    model = tiny_model()
    assert step_model(model, None) is model
    assert step_ctx(model).model is model and step_ctx(model).train_net is None


def test_under_a_wrapper_ctx_model_reads_and_writes_the_model_but_forwards_through_it():
    model = tiny_model()
    spy = Spy(model.net)
    view = step_model(model, spy)
    assert view is not model and step_model(view, spy) is view
    assert isinstance(view, NNModel)  # spec §6.1: ctx.model is the NNModel, under DDP too
    assert view.net is model.net and view.device == model.device
    assert view.task_adapter is model.task_adapter
    inputs, _ = view.split_batch(tiny_batches()[0])
    view.forward_raw(inputs)
    assert spy.calls == 1
    loss = nn.CrossEntropyLoss()
    view.loss_fn = loss  # type: ignore[misc]  # a write lands on the model
    assert model.loss_fn is loss


# -- the training forward in the contexts -------------------------------------------------
def test_the_default_step_runs_its_forward_through_the_context_s_train_net():
    model = tiny_model()
    spy = Spy(model.net)
    ctx = step_ctx(model, spy)
    assert ctx.model.net is model.net
    before = weights(model)
    record = default_train_step(ctx)
    assert isinstance(record, NNEvaluationDataPoint) and spy.calls == 1
    assert any(not torch.equal(before[k], v) for k, v in weights(model).items())
    inputs, _ = model.split_batch(tiny_batches()[0])
    ctx.forward(inputs)
    ctx.model.forward_raw(inputs)  # the documented custom-step call goes through it too
    assert spy.calls == 3


def test_objectives_run_their_forward_through_the_context_s_train_net():
    model = tiny_model()
    spy = Spy(model.net)
    ctx = ObjectiveContext(model=model, batch=tiny_batches()[0], batch_idx=0, epoch=0,
                           precision=FP32, train_net=spy)
    result = supervised_objective()(ctx)
    assert isinstance(result, ObjectiveResult) and spy.calls == 1
    plain = ObjectiveContext(model=model, batch=tiny_batches()[0], batch_idx=0, epoch=0,
                             precision=FP32)
    assert plain.model is model and plain.train_net is None


def test_one_process_training_hands_the_steps_the_model_and_no_wrapper(tmp_path):
    model = tiny_model()
    seen: list[tuple[object, object]] = []

    def step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
        seen.append((ctx.model, ctx.train_net))
        return default_train_step(ctx)

    def objective(ctx: ObjectiveContext) -> ObjectiveResult:
        seen.append((ctx.model, ctx.train_net))
        inputs, target = ctx.split()
        out = ctx.forward(inputs)
        return ObjectiveResult([LossTerm("loss", nn.functional.cross_entropy(
            out, target, reduction="sum"), denominator=len(target))])

    model.train(tiny_train_params(), train_step_fn=step, verbose=False, root=tmp_path / "a")
    model.train(tiny_train_params(n_epochs=2), objective=objective, verbose=False,
                root=tmp_path / "b")
    assert seen and all(m is model and net is None for m, net in seen)


def test_the_trainer_context_carries_the_forward_too(tmp_path):
    model = tiny_model()
    seen: list[TrainerStepContext] = []

    def step(ctx: TrainerStepContext) -> NNEvaluationDataPoint:
        seen.append(ctx)
        inputs, target = ctx.model.split_batch(ctx.batch)
        loss = nn.functional.cross_entropy(ctx.forward(inputs), target)
        opt = ctx.optimizers["all"]
        opt.zero_grad()
        loss.backward()
        opt.step()
        ctx.report_update("all")
        return NNEvaluationDataPoint(loss=float(loss.detach()))

    params = NNTrainerParams(n_epochs=1, train_loader=tiny_batches(), optims={"all": sgd()})
    Trainer(model).train(params, trainer_step_fn=step, verbose=False, root=tmp_path)
    assert seen and all(c.model is model and c.train_net is None for c in seen)
    spy = Spy(model.net)
    ctx = TrainerStepContext(model=model, batch=tiny_batches()[0], batch_idx=0, epoch=0,
                             optimizers={}, schedulers={}, precision=FP32,
                             trainer=Trainer(model), train_net=spy)
    inputs, _ = model.split_batch(ctx.batch)
    ctx.forward(inputs)
    ctx.model.forward_raw(inputs)
    assert spy.calls == 2


# -- transforms return the recipes --------------------------------------------------------
def test_transforms_return_the_recipes_and_never_touch_a_model():
    model = tiny_model()
    recipe = TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"], "rank": 2})
    applied = apply_transform(model.net, recipe, base=model.params.net)
    assert applied == (recipe,)
    assert model.transforms == ()  # the caller records them, not the transform code
    again = apply_transform(model.net, TransformRecipe(
        "nnx.low_rank", 1, {"targets": ["layers.1"], "rank": 2}), base=model.params.net,
        applied=applied)
    assert again[0] is recipe and len(again) == 2
    fresh = tiny_model(1)
    assert replay_transforms(fresh.net, again, base=fresh.params.net) == again
    assert fresh.transforms == ()
    assert [tuple(p.shape) for p in fresh.net.parameters()] == [
        tuple(p.shape) for p in model.net.parameters()]
    recorded = tiny_model()
    recorded.apply_transform(recipe)
    assert recorded.transforms == (recipe,)


def test_module_of_is_the_module_or_the_models_net_and_names_its_owner():
    # Issue 41: one helper for "an NNModel or a module" (nnx.benchmarking, nnx-viz).
    model = tiny_model()
    assert extend.module_of(model) is model.net
    assert extend.module_of(model.net) is model.net
    with pytest.raises(TypeError, match=r"^acme\.draw: expected an nn\.Module or a model "
                                        r"with a \.net module; got object$"):
        extend.module_of(object(), owner="acme.draw")
    with pytest.raises(TypeError, match=r"^expected an nn\.Module"):
        extend.module_of(3)
