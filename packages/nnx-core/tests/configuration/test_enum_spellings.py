"""String shorthands for enum-valued params (spec §2.3, §3): ``device="cpu"``,
``precision="bf16"`` … are normalized to the member in ``__post_init__``, so state()
and the run id are the enum's; an unknown spelling is refused naming the field and
the accepted spellings."""

from __future__ import annotations

import re
from typing import Any

import pytest

from nnx import (
    Activations,
    Devices,
    Losses,
    Nets,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    NNTrainParams,
    Optims,
    Precision,
    Schedulers,
    run_id,
)

NET = NNParams(input_dim=4, output_dim=3, hidden_dims=(8, 8))


def _id(model: NNModelParams, net: NNParams = NET, optim: NNOptimParams | None = None,
        scheduler: NNSchedulerParams | None = None) -> str:
    train = NNTrainParams(n_epochs=2, optim=optim or NNOptimParams(), scheduler=scheduler)
    return run_id(model=model, net=net, train=train)


@pytest.mark.parametrize(("field", "spelling", "member"), [
    ("device", "cpu", Devices.CPU), ("device", "CPU", Devices.CPU),
    ("device", "Auto", Devices.AUTO), ("device", "cuda", Devices.CUDA),
    ("precision", "bf16", Precision.BF16), ("precision", "BF16", Precision.BF16),
    ("precision", "bf16-mixed", Precision.BF16), ("precision", "16-mixed", Precision.FP16),
    ("precision", "fp16", Precision.FP16), ("precision", "32", Precision.FP32),
    ("precision", "32-true", Precision.FP32),
    ("loss", "mean_squared_error", Losses.MEAN_SQUARED_ERROR),
    ("loss", "CROSS_ENTROPY", Losses.CROSS_ENTROPY),
    ("net", "feed_fwd", Nets.FEED_FWD), ("net", "MOE", Nets.MOE),
])
def test_a_model_field_spelled_as_a_string_is_the_member(field: str, spelling: str,
                                                         member: Any) -> None:
    typed, spelled = NNModelParams(**{field: member}), NNModelParams(**{field: spelling})
    assert getattr(spelled, field) is member
    assert spelled.state() == typed.state() and spelled == typed
    assert _id(spelled) == _id(typed)
    assert NNModelParams.from_state(spelled.state()) == typed


def test_optimizer_scheduler_and_activation_spellings_are_the_members() -> None:
    model = NNModelParams()
    assert NNOptimParams(name="adamw").name is Optims.ADAMW
    assert (_id(model, optim=NNOptimParams(name="SGD", momentum=0.9))
            == _id(model, optim=NNOptimParams(name=Optims.SGD, momentum=0.9)))
    step = NNSchedulerParams(kind="step", step_size=2)
    assert step.kind is Schedulers.STEP
    assert (_id(model, scheduler=step)
            == _id(model, scheduler=NNSchedulerParams(kind=Schedulers.STEP, step_size=2)))
    # The plateau default keeps its one spelling (kind=None) whichever way it is named.
    assert NNSchedulerParams(kind="reduce_lr_on_plateau").state() == NNSchedulerParams().state()
    net = NNParams(input_dim=4, output_dim=3, hidden_dims=(8, 8), activation="gelu",
                   activations=["relu", "Tanh"])
    assert net.activation is Activations.GELU
    assert net.activations == (Activations.RELU, Activations.TANH)
    typed = NNParams(input_dim=4, output_dim=3, hidden_dims=(8, 8), activation=Activations.GELU,
                     activations=(Activations.RELU, Activations.TANH))
    assert net.state() == typed.state() and _id(model, net=net) == _id(model, net=typed)


@pytest.mark.parametrize(("build", "message"), [
    (lambda: NNModelParams(device="gpu"), re.escape(
     "NNModelParams.device must be a Devices member or one of its spellings (any case): "
     "'auto', 'cpu', 'cuda', 'mps'; got 'gpu'")),
    (lambda: NNModelParams(device="cuda:0"), "NNModelParams.device .*got 'cuda:0'"),
    (lambda: NNModelParams(device=True), "NNModelParams.device .*got True"),
    (lambda: NNModelParams(precision="bf16-true"),  # Lightning's pure-bf16 is no NNx policy
     re.escape("NNModelParams.precision must be a Precision member or one of its spellings "
     "(any case): 'fp32', 'fp16', 'bf16', '16-mixed', 'bf16-mixed', '32', '32-true'; "
     "got 'bf16-true'")),
    (lambda: NNModelParams(loss="mse"),
     "NNModelParams.loss must be a Losses member .*'cross_entropy', .*got 'mse'"),
    (lambda: NNModelParams(net="mlp"), "NNModelParams.net 'mlp': Nets has no member 'MLP'"),
    (lambda: NNOptimParams(name="lion"), "NNOptimParams.name must be an? Optims member .*"
                                         "'adam', 'adam_amsgrad', 'adamw', 'sgd', "
                                         "'sgd_nesterov'; got 'lion'"),
    (lambda: NNSchedulerParams(kind="cosine"), "NNSchedulerParams.kind .*got 'cosine'"),
    (lambda: NNParams(input_dim=4, output_dim=3, hidden_dims=(8,), activation="swish"),
     r"NNParams.activation must be an? Activations member .*'silu'.*got 'swish'"),
    (lambda: NNParams(input_dim=4, output_dim=3, hidden_dims=(8,), activations=["mish"]),
     r"NNParams.activations\[0\] .*got 'mish'"),
])
def test_an_unknown_spelling_is_refused_naming_the_field_and_the_spellings(build: Any,
                                                                           message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build()
