"""What the Trainer refuses before any run directory exists (spec §8.1, §8.2): each §8.2
refusal, an update listener, shared parameters and missing param_groups."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _nnx_core_tiny import tiny_model
from _support.trainer import (
    TWO,
    _group,
    _plan,
    full,
    rng,
    same_weights,
    weights,
)

from nnx import (
    Callback,
    Devices,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    Precision,
    Trainer,
    TrainerStepContext,
    build_optimizer,
    supervised_objective,
)


# == 3. every refusal of §8.2 ==================================================================
class RegistersUpdateListener(Callback):
    def on_train_begin(self, ctx):
        ctx.update_listeners.append(lambda ctx: None)


def _noop_step(ctx: TrainerStepContext) -> NNEvaluationDataPoint:
    raise AssertionError("a refused run never calls its step")


CLIP = "optimizer 'b': a trainer_step_fn run cannot apply grad_clip_norm or " \
       "accumulate_grad_batches to the step's own updates; clip or accumulate inside the step " \
       "function, or pass objective= instead"


REFUSALS = {
    "no_step_no_objective": (
        {}, _plan(*TWO), ValueError,
        "Trainer has no default step: multi-optimizer updates are scenario-specific, so pass "
        "trainer_step_fn=... (which owns every update) or objective=... (the shared update "
        "engine)"),
    "step_and_objective": (
        {"trainer_step_fn": _noop_step, "objective": supervised_objective()}, _plan(*TWO),
        ValueError, "a run has exactly one update owner: pass trainer_step_fn or objective=, "
                    "not both"),
    "grad_clip_with_step": (
        {"trainer_step_fn": _noop_step},
        _plan(TWO[0], ("b", _group("layers.1.*", grad_clip=1.0))), ValueError, CLIP),
    "accumulation_with_step": (
        {"trainer_step_fn": _noop_step},
        _plan(TWO[0], ("b", _group("layers.1.*", accumulate_grad=2))), ValueError, CLIP),
    "bf16_with_step": (
        {"trainer_step_fn": _noop_step, "precision": Precision.BF16}, _plan(*TWO), ValueError,
        "a trainer_step_fn owns every update in full precision; precision=BF16 needs objective= "
        "(the shared update engine applies autocast and the FP16 scaler)"),
    "no_auto_step_with_objective": (
        {"objective": supervised_objective()}, _plan(*TWO, auto_step_schedulers=False),
        ValueError, "an objective run has no step function to take scheduler timing over: "
                    "auto_step_schedulers=False would leave every schedule unstepped"),
    "uneven_windows_with_objective": (
        {"objective": supervised_objective()},
        _plan(TWO[0], ("b", _group("layers.1.*", accumulate_grad=2))), ValueError,
        "the named optimizers share one update window in an objective run; got "
        "accumulate_grad_batches [1, 2]"),
    "shared_parameters_with_objective": (
        {"objective": supervised_objective()},
        _plan(("a", _group("layers.*")), ("b", _group("layers.1.*"))), ValueError,
        "optimizers 'a' and 'b' both own 2 parameter(s): layers.1.weight, layers.1.bias; the "
        "Trainer's strict ownership gives each parameter one optimizer, or both would update "
        "the same weights (an optimizer without param_groups owns every trainable parameter): "
        "give each optimizer param_groups matching disjoint parameters"),
    "spec_matching_nothing": (
        {"objective": supervised_objective()}, _plan(TWO[0], ("b", _group("decoder.*"))),
        ValueError, "build_optimizer (strict): param_groups 'decoder.*' match no trainable "
                    "parameter; check the names against net.named_parameters()"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_each_refusal_of_8_2_reserves_no_run_directory(tmp_path, case):
    kwargs, params, error, message = REFUSALS[case]
    kwargs = dict(kwargs)
    precision = kwargs.pop("precision", None)
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                    params=NNModelParams(device=Devices.CPU, precision=precision))
    before, before_rng = weights(model), rng()
    with pytest.raises(error, match=full(message)):
        Trainer(model).train(params, verbose=False, root=tmp_path / "runs", **kwargs)
    assert not (tmp_path / "runs").exists()
    assert same_weights(weights(model), before) and rng() == before_rng


def test_a_callback_registering_an_update_listener_is_refused(tmp_path):
    model = tiny_model()
    with pytest.raises(ValueError, match=full(
            "Trainer.train refuses a callback that registers an update listener "
            "(ctx.update_listeners, an NNModel.train feature); use "
            "Callback.on_optimizer_update in an objective run")):
        Trainer(model).train(_plan(*TWO), objective=supervised_objective(),
                             callbacks=[RegistersUpdateListener()], verbose=False,
                             root=tmp_path)


# == §8.1: strict ownership refuses two optimizers owning one parameter =======================
OVERLAP = ("optimizers 'a' and 'b' both own 4 parameter(s): layers.0.weight, layers.0.bias, "
           "layers.1.weight, layers.1.bias; the Trainer's strict ownership gives each parameter "
           "one optimizer, or both would update the same weights (an optimizer without "
           "param_groups owns every trainable parameter): give each optimizer param_groups "
           "matching disjoint parameters")


def test_strict_ownership_names_the_parameters_two_optimizers_share():
    from nnx.objectives.ownership import check_strict_ownership

    net = tiny_model().net
    plain = NNOptimParams.builder().sgd(max_lr=0.1).build()  # no param_groups: owns all

    def built(*configs: tuple[str, NNOptimParams]) -> dict[str, torch.optim.Optimizer]:
        return {name: build_optimizer(net, config, strict_param_groups=True)
                for name, config in configs}

    with pytest.raises(ValueError, match=full(OVERLAP)):
        check_strict_ownership(net, built(("a", plain), ("b", plain)))
    with pytest.raises(ValueError, match=r"^optimizers 'a' and 'b' both own 2 parameter\(s\): "
                                         r"layers\.1\.weight, layers\.1\.bias; "):
        check_strict_ownership(net, built(("a", _group("layers.*")), ("b", _group("layers.1.*"))))
    with pytest.raises(ValueError, match=r"^optimizers 'a' and 'b' both own 2 parameter\(s\): "
                                         r"layers\.0\.weight, layers\.0\.bias; "):
        check_strict_ownership(net, built(("a", _group("layers.0.*")), ("b", plain)))
    check_strict_ownership(net, built(*TWO))  # disjoint groups: nothing to refuse
    check_strict_ownership(net, built(("only", plain)))  # one optimizer owns everything


@pytest.mark.parametrize("owner", ["step", "objective"])
def test_two_optimizers_without_param_groups_are_refused_before_any_run_dir(tmp_path, owner):
    plain = NNOptimParams.builder().sgd(max_lr=0.1).build()
    model = tiny_model()
    before, before_rng = weights(model), rng()
    kwargs: dict[str, Any] = ({"trainer_step_fn": _noop_step} if owner == "step" else
                              {"objective": supervised_objective()})
    with pytest.raises(ValueError, match=full(OVERLAP)):
        Trainer(model).train(_plan(("a", plain), ("b", plain)), verbose=False,
                             root=tmp_path / "runs", **kwargs)
    assert not (tmp_path / "runs").exists()
    assert same_weights(weights(model), before) and rng() == before_rng
