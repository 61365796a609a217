"""Enums-as-factories (spec §3): every member constructs the object it names."""

from __future__ import annotations

import importlib.util
import pickle

import pytest
import torch
from _support.enums import lrs_over
from torch import nn
from torch.optim import lr_scheduler

from nnx import (
    Activations,
    Checkpoints,
    Devices,
    LinearWarmupDecayLR,
    Losses,
    MissingDistributionError,
    Nets,
    NNOptimParams,
    NNParams,
    NNSchedulerParams,
    Precision,
    Schedulers,
    build_optimizer,
)


def test_losses_construct_torch_modules_with_kwargs():
    assert type(Losses.CROSS_ENTROPY()) is nn.CrossEntropyLoss
    assert type(Losses.NEGATIVE_LOG_LIKELIHOOD()) is nn.NLLLoss
    assert type(Losses.BINARY_CROSS_ENTROPY()) is nn.BCEWithLogitsLoss
    assert type(Losses.MEAN_SQUARED_ERROR()) is nn.MSELoss
    assert Losses.CROSS_ENTROPY(ignore_index=-1).ignore_index == -1


def test_activations_devices_precision_checkpoints():
    assert type(Activations.RELU()) is nn.ReLU and type(Activations.GELU()) is nn.GELU
    assert Devices.CPU() == torch.device("cpu")
    assert Devices.AUTO().type in {"cpu", "cuda", "mps"}
    assert Precision.BF16() is torch.bfloat16 and not Precision.FP32.is_reduced
    assert Checkpoints.BEST() == "best.pt"
    assert Checkpoints.LAST("runs/abc") == "runs/abc/checkpoints/last.pt"


def test_cuda_device_refuses_when_absent():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="no CUDA device"):
        Devices.CUDA()


def test_schedulers_build_torch_schedulers_on_both_clocks():
    net = nn.Linear(1, 1)
    opt = build_optimizer(net, NNOptimParams(max_lr=0.1))
    cos_params = NNSchedulerParams(kind=Schedulers.COSINE_ANNEALING)
    cosine = Schedulers.COSINE_ANNEALING(opt, cos_params, 5)
    assert isinstance(cosine, lr_scheduler.CosineAnnealingLR) and cosine.T_max == 5
    on_updates = NNSchedulerParams.builder().cosine_annealing().clock("optimizer_update").build()
    assert Schedulers.COSINE_ANNEALING(opt, on_updates, 2, updates_per_epoch=3).T_max == 6
    with pytest.raises(ValueError, match="needs the planned updates per epoch"):
        Schedulers.COSINE_ANNEALING(opt, on_updates, 2)
    plateau = NNSchedulerParams(factor=0.5, patience=2, cooldown=1, threshold=1e-3, min_lr=1e-7)
    rop = plateau.resolved_kind(opt, plateau, 5)
    assert isinstance(rop, lr_scheduler.ReduceLROnPlateau)
    assert (rop.factor, rop.patience, rop.cooldown, rop.threshold) == (0.5, 2, 1, 1e-3)
    step = NNSchedulerParams(kind=Schedulers.STEP, step_size=2, factor=0.5)
    assert isinstance(step.resolved_kind(opt, step, 5), lr_scheduler.StepLR)
    one = NNSchedulerParams(kind=Schedulers.ONE_CYCLE, total_steps=10, max_lr=0.5)
    oc = one.resolved_kind(opt, one, 5)
    assert isinstance(oc, lr_scheduler.OneCycleLR) and oc.total_steps == 10


def test_warmup_scheduler_state_round_trips():
    net = nn.Linear(1, 1)
    opt = torch.optim.SGD(net.parameters(), lr=0.12)
    sched = LinearWarmupDecayLR(opt, warmup_steps=3, total_steps=8)
    lrs_over(sched, opt, 2)
    state = sched.state_dict()
    opt2 = torch.optim.SGD(nn.Linear(1, 1).parameters(), lr=0.12)
    twin = LinearWarmupDecayLR(opt2, warmup_steps=3, total_steps=8)
    # A resume restores the optimizer (which holds the current rate) and the schedule.
    opt2.load_state_dict(opt.state_dict())
    twin.load_state_dict(state)
    assert twin.last_epoch == sched.last_epoch
    assert lrs_over(twin, opt2, 3) == pytest.approx(lrs_over(sched, opt, 3))


# -- Nets -----------------------------------------------------------------------------

def test_nets_behave_like_an_enum():
    assert Nets["FEED_FWD"] is Nets.FEED_FWD
    assert Nets.FEED_FWD.name == "FEED_FWD" and Nets.FEED_FWD.value == "feed_fwd"
    names = [m.name for m in Nets]
    assert names[:4] == ["FEED_FWD", "CONV", "VIT", "MOE"]
    assert pickle.loads(pickle.dumps(Nets.VIT)) is Nets.VIT
    assert repr(Nets.CONV) == "<Nets.CONV>"
    assert Nets.FEED_FWD in Nets


def test_nets_member_builds_and_checks_its_params_class():
    net = Nets.FEED_FWD(NNParams(input_dim=3, output_dim=2, hidden_dims=(4,)))
    assert isinstance(net, nn.Module)
    assert net(torch.zeros(5, 3)).shape == (5, 2)
    with pytest.raises(TypeError, match=r"Nets\.VIT is configured with NNViTParams; got NNParams"):
        Nets.VIT(NNParams(input_dim=3, output_dim=2))


def test_add_on_member_without_its_distribution_names_what_to_install():
    # The workspace installs nnx-lm and nnx-graph (their members then resolve, tested there); the
    # nnx-core-only à-la-carte check still sees the hint.
    if importlib.util.find_spec("nnx.lm") is None:
        with pytest.raises(MissingDistributionError, match=r"pip install nnx-lm"):
            _ = Nets["TRANSFORMER"]
        assert not hasattr(Nets, "TRANSFORMER")
    if importlib.util.find_spec("nnx.graph") is None:  # likewise nnx-graph
        with pytest.raises(MissingDistributionError, match=r"Nets\.GRAPH_CONV .* nnx-graph"):
            _ = Nets["GRAPH_CONV"]
    with pytest.raises(AttributeError, match="Nets has no member 'NOPE'"):
        _ = Nets.NOPE
    with pytest.raises(KeyError):
        _ = Nets["NOPE"]


def test_nets_member_refuses_a_params_subclass_of_another_net():
    from nnx import NNConvParams

    with pytest.raises(TypeError, match=r"Nets\.FEED_FWD is configured with NNParams; got NNConv"):
        Nets.FEED_FWD(NNConvParams(input_dim=64, output_dim=2))
