"""The one validator (spec §2.3): every refusal names the field and its domain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from nnx import (
    NNConvParams,
    NNMoEParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNParams,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainParams,
    NNViTParams,
    Optims,
    Schedulers,
)
from nnx._foundation.hashing import md5_hex
from nnx._foundation.validation import (
    NON_NEGATIVE,
    POSITIVE,
    UNIT_HALF_OPEN,
    check_batch_sizes,
    check_count,
    check_real,
)

BAD_COUNTS = [True, False, 2.0, "2", math.nan, math.inf, -math.inf, None, [2]]
BAD_REALS = [math.nan, math.inf, -math.inf, True, False, "0.1", "nan", b"1", None]


def net(**kw):
    return NNParams(**{"input_dim": 4, "output_dim": 2, **kw})


# Every integer count of the §2.3 inventory, as (constructor, field) pairs.
COUNT_FIELDS = [
    (lambda v: net(input_dim=v), "NNParams.input_dim"),
    (lambda v: net(output_dim=v), "NNParams.output_dim"),
    (lambda v: net(hidden_dims=(8, v)), "NNParams.hidden_dims[1]"),
    (lambda v: net(n_heads=v), "NNParams.n_heads"),
    (lambda v: NNConvParams(input_dim=64, output_dim=2, conv_channels=(v,)),
     "NNConvParams.conv_channels[0]"),
    (lambda v: NNConvParams(input_dim=64, output_dim=2, in_channels=v), "NNConvParams.in_channels"),
    (lambda v: NNConvParams(input_dim=64, output_dim=2, kernel_size=v), "NNConvParams.kernel_size"),
    (lambda v: NNConvParams(input_dim=64, output_dim=2, stride=v), "NNConvParams.stride"),
    (lambda v: NNConvParams(input_dim=64, output_dim=2, pool_size=v), "NNConvParams.pool_size"),
    (lambda v: NNConvParams(input_dim=64, output_dim=2, padding=v), "NNConvParams.padding"),
    (lambda v: NNViTParams(output_dim=2, image_size=v), "NNViTParams.image_size"),
    (lambda v: NNViTParams(output_dim=2, patch_size=v), "NNViTParams.patch_size"),
    (lambda v: NNViTParams(output_dim=2, in_channels=v), "NNViTParams.in_channels"),
    (lambda v: NNViTParams(output_dim=2, d_model=v), "NNViTParams.d_model"),
    (lambda v: NNViTParams(output_dim=2, n_layers=v), "NNViTParams.n_layers"),
    (lambda v: NNViTParams(output_dim=2, ffn_mult=v), "NNViTParams.ffn_mult"),
    (lambda v: NNMoEParams(input_dim=4, output_dim=2, num_experts=v), "NNMoEParams.num_experts"),
    (lambda v: NNMoEParams(input_dim=4, output_dim=2, top_k=v), "NNMoEParams.top_k"),
    (lambda v: NNOptimParams(accumulate_grad_batches=v), "NNOptimParams.accumulate_grad_batches"),
    (lambda v: NNTrainParams(n_epochs=v), "NNTrainParams.n_epochs"),
    (lambda v: NNTrainerParams(n_epochs=v, optims={"a": NNOptimParams()}),
     "NNTrainerParams.n_epochs"),
    (lambda v: NNSchedulerParams(kind=Schedulers.STEP, step_size=v), "NNSchedulerParams.step_size"),
    (lambda v: NNSchedulerParams(kind=Schedulers.COSINE_ANNEALING, T_max=v),
     "NNSchedulerParams.T_max"),
    (lambda v: NNSchedulerParams(kind=Schedulers.ONE_CYCLE, total_steps=v),
     "NNSchedulerParams.total_steps"),
    (lambda v: NNSchedulerParams(kind=Schedulers.LINEAR_WARMUP_DECAY, warmup_steps=v),
     "NNSchedulerParams.warmup_steps"),
    (lambda v: NNSchedulerParams(patience=v), "NNSchedulerParams.patience"),
    (lambda v: NNSchedulerParams(cooldown=v), "NNSchedulerParams.cooldown"),
]

# Every real-valued hyperparameter of the inventory.
REAL_FIELDS = [
    (lambda v: NNOptimParams(max_lr=v), "NNOptimParams.max_lr"),
    (lambda v: NNOptimParams(weight_decay=v), "NNOptimParams.weight_decay"),
    (lambda v: NNOptimParams(eps=v), "NNOptimParams.eps"),
    (lambda v: NNOptimParams(grad_clip_norm=v), "NNOptimParams.grad_clip_norm"),
    (lambda v: NNOptimParams(name=Optims.SGD, momentum=v), "NNOptimParams.momentum"),
    (lambda v: NNOptimParams(momentum=(v, 0.9)), "NNOptimParams.momentum[0]"),
    (lambda v: NNOptimParams(momentum=(0.9, v)), "NNOptimParams.momentum[1]"),
    (lambda v: NNParamGroupSpec(name_pattern="*", lr=v), "NNParamGroupSpec.lr"),
    (lambda v: NNParamGroupSpec(name_pattern="*", lr_multiplier=v),
     "NNParamGroupSpec.lr_multiplier"),
    (lambda v: NNParamGroupSpec(name_pattern="*", weight_decay=v), "NNParamGroupSpec.weight_decay"),
    (lambda v: NNSchedulerParams(min_lr=v), "NNSchedulerParams.min_lr"),
    (lambda v: NNSchedulerParams(threshold=v), "NNSchedulerParams.threshold"),
    (lambda v: NNSchedulerParams(factor=v), "NNSchedulerParams.factor"),
    (lambda v: NNSchedulerParams(kind=Schedulers.ONE_CYCLE, max_lr=v), "NNSchedulerParams.max_lr"),
    (lambda v: net(dropout_prob=v), "NNParams.dropout_prob"),
    (lambda v: net(hidden_dims=(3,), dropout_probs=(v,)), "NNParams.dropout_probs[0]"),
    (lambda v: NNMoEParams(input_dim=4, output_dim=2, aux_loss_weight=v),
     "NNMoEParams.aux_loss_weight"),
]


@pytest.mark.parametrize("bad", BAD_COUNTS, ids=repr)
@pytest.mark.parametrize(("make", "field"), COUNT_FIELDS, ids=[f for _, f in COUNT_FIELDS])
def test_counts_refuse_non_integers(make, field, bad):
    if bad is None and field in {"NNParams.n_heads"}:
        return  # None is n_heads' "unset" sentinel
    if bad is None and field.split(".")[1] in {"step_size", "T_max", "total_steps", "warmup_steps"}:
        return  # None is the schedule budgets' "planned horizon" sentinel
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        make(bad)


@pytest.mark.parametrize("bad", BAD_REALS, ids=repr)
@pytest.mark.parametrize(("make", "field"), REAL_FIELDS, ids=[f for _, f in REAL_FIELDS])
def test_reals_refuse_non_finite_bool_and_strings(make, field, bad):
    optional = {"NNOptimParams.eps", "NNOptimParams.grad_clip_norm", "NNOptimParams.momentum",
                "NNParamGroupSpec.lr", "NNParamGroupSpec.lr_multiplier",
                "NNParamGroupSpec.weight_decay", "NNSchedulerParams.max_lr"}
    if bad is None and field in optional:
        return  # None is the documented "unset" sentinel for these
    with pytest.raises(ValueError, match=field.replace("[", r"\[").replace("]", r"\]")):
        make(bad)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: NNOptimParams(max_lr=-1e-3), r"NNOptimParams\.max_lr must be >= 0"),
        (lambda: NNOptimParams(weight_decay=-0.1), r"NNOptimParams\.weight_decay must be >= 0"),
        (lambda: NNOptimParams(eps=0.0), r"NNOptimParams\.eps must be > 0"),
        (lambda: NNOptimParams(grad_clip_norm=0), r"NNOptimParams\.grad_clip_norm must be > 0"),
        (lambda: NNOptimParams(name=Optims.SGD, momentum=-0.5), r"momentum must be >= 0"),
        (lambda: NNOptimParams(momentum=(1.0, 0.9)), r"beta1\) must be in \[0, 1\)"),
        (lambda: NNParamGroupSpec(name_pattern="*", lr=0.0), r"NNParamGroupSpec\.lr must be > 0"),
        (lambda: NNParamGroupSpec(name_pattern="*", lr_multiplier=0),
         r"lr_multiplier must be > 0.*nnx\.finetune\.freeze"),
        (lambda: NNParamGroupSpec(name_pattern="*", weight_decay=-1), r"weight_decay must be >= 0"),
        (lambda: NNSchedulerParams(factor=1.0), r"NNSchedulerParams\.factor must be in \(0, 1\)"),
        (lambda: NNSchedulerParams(min_lr=-1e-9), r"min_lr must be >= 0"),
        (lambda: NNSchedulerParams(kind=Schedulers.ONE_CYCLE, max_lr=0.0), r"max_lr must be > 0"),
        (lambda: net(dropout_prob=1.5), r"NNParams\.dropout_prob must be in \[0, 1\]"),
        (lambda: NNTrainParams(n_epochs=0), r"NNTrainParams\.n_epochs must be an integer >= 1"),
        (lambda: NNOptimParams(accumulate_grad_batches=0), r"accumulate_grad_batches .*>= 1"),
        (lambda: NNMoEParams(input_dim=4, output_dim=2, num_experts=1), r"num_experts .*>= 2"),
        (lambda: NNMoEParams(input_dim=4, output_dim=2, num_experts=3, top_k=4),
         r"top_k must be an integer in \[1, 3\]"),
        (lambda: NNSchedulerParams(kind=Schedulers.STEP, step_size=0), r"step_size .*>= 1"),
    ],
)
def test_domains(make, message):
    with pytest.raises(ValueError, match=message):
        make()


def test_zero_keeps_its_meaning_where_allowed():
    # Zero is meaningful for decay, lr, padding, patience and cooldown.
    assert NNOptimParams(max_lr=0.0, weight_decay=0.0).max_lr == 0.0
    assert NNConvParams(input_dim=64, output_dim=2, padding=0, kernel_size=1).padding == 0
    s = NNSchedulerParams(patience=0, cooldown=0)
    assert (s.patience, s.cooldown) == (0, 0)
    assert NNOptimParams(momentum=(0.0, 0.0)).momentum == (0.0, 0.0)


def test_numpy_integers_normalize_to_plain_int():
    p = NNParams(input_dim=np.int64(2), output_dim=np.int32(3), hidden_dims=[np.int64(5)])
    assert type(p.input_dim) is int and type(p.output_dim) is int
    assert all(type(d) is int for d in p.hidden_dims)
    assert isinstance(p.hidden_dims, tuple)
    plain = NNParams(input_dim=2, output_dim=3, hidden_dims=(5,))
    assert p.state() == plain.state()
    assert md5_hex(p.state()) == md5_hex(plain.state())
    assert NNOptimParams(accumulate_grad_batches=np.int64(2)) == NNOptimParams(
        accumulate_grad_batches=2
    )
    assert md5_hex({"x": np.int64(2)}) == md5_hex({"x": 2})


def test_numpy_floats_become_plain_floats():
    p = NNOptimParams(max_lr=np.float32(0.5), weight_decay=np.float64(0.25))
    assert type(p.max_lr) is float and p.max_lr == 0.5
    assert type(p.weight_decay) is float


def test_helpers_directly():
    assert check_count("x", np.int16(7)) == 7
    assert check_real("x", 3, POSITIVE) == 3
    assert check_real("x", 0.5, UNIT_HALF_OPEN) == 0.5
    with pytest.raises(ValueError, match=r"^x must be an integer >= 1; got 2\.0 \(float\)$"):
        check_count("x", 2.0)
    with pytest.raises(ValueError, match=r"x must be a finite real number >= 0; got nan"):
        check_real("x", float("nan"), NON_NEGATIVE)
    assert str(UNIT_HALF_OPEN) == "in [0, 1)"


def test_batch_sizes_follow_the_count_rule_with_none_as_full_split():
    assert check_batch_sizes("batch_sizes", (32, None, np.int64(8))) == (32, None, 8)
    for bad in [(0, 8), (True, 8), (2.0,), ("4",), (math.nan,)]:
        with pytest.raises(ValueError, match=r"batch_sizes\[0\]"):
            check_batch_sizes("batch_sizes", bad)
    with pytest.raises(ValueError, match="batch_sizes must be a sequence"):
        check_batch_sizes("batch_sizes", 32)


def test_cross_field_rules():
    with pytest.raises(ValueError, match=r"n_heads must divide d_model"):
        NNViTParams(output_dim=2, d_model=30, n_heads=4)
    with pytest.raises(ValueError, match=r"patch_size must divide image_size"):
        NNViTParams(output_dim=2, image_size=30, patch_size=4)
    with pytest.raises(ValueError, match=r"perfect square"):
        NNConvParams(input_dim=60, output_dim=2)
    with pytest.raises(ValueError, match=r"reduces a 4×4 image to nothing"):
        NNConvParams(input_dim=16, output_dim=2, conv_channels=(4, 4, 4))
    with pytest.raises(ValueError, match=r"one value per hidden layer \(2\); got 1"):
        net(hidden_dims=(3, 3), dropout_probs=(0.1,))
    with pytest.raises(ValueError, match=r"warmup_steps \(9\) must not exceed total_steps \(8\)"):
        NNSchedulerParams(kind=Schedulers.LINEAR_WARMUP_DECAY, warmup_steps=9, total_steps=8)
    with pytest.raises(ValueError, match=r"set lr or lr_multiplier, not both"):
        NNParamGroupSpec(name_pattern="*", lr=1e-3, lr_multiplier=0.1)
    with pytest.raises(ValueError, match=r"eps applies to the Adam family"):
        NNOptimParams(name=Optims.SGD, eps=1e-8)
    with pytest.raises(ValueError, match=r"must be > 0 for Optims.SGD_NESTEROV"):
        NNOptimParams(name=Optims.SGD_NESTEROV, momentum=0.0)
    with pytest.raises(ValueError, match=r"\(beta1, beta2\) pair"):
        NNOptimParams(name=Optims.ADAMW, momentum=0.9)
    with pytest.raises(ValueError, match=r"betas are Adam's"):
        NNOptimParams(name=Optims.SGD, momentum=(0.9, 0.99))
    with pytest.raises(ValueError, match=r"cannot run on the 'optimizer_update' clock"):
        NNSchedulerParams(clock="optimizer_update")
    with pytest.raises(ValueError, match=r"clock must be one of 'epoch', 'optimizer_update'"):
        NNSchedulerParams(kind=Schedulers.STEP, step_size=2, clock="batch")


def loop_params(cls, **kw):
    if cls is NNTrainerParams:
        kw.setdefault("optims", {"main": NNOptimParams()})
    return cls(**kw)


@pytest.mark.parametrize("cls", [NNTrainParams, NNTrainerParams])
@pytest.mark.parametrize("seed", [2**32, -1, True, 1.0, "1", math.nan])
def test_a_seed_set_seed_would_refuse_is_refused_at_construction(cls, seed):
    with pytest.raises(ValueError, match=rf"{cls.__name__}\.seed must be an integer in "
                                         r"\[0, 4294967295\]"):
        loop_params(cls, seed=seed)


@pytest.mark.parametrize("cls", [NNTrainParams, NNTrainerParams])
def test_numpy_seeds_are_normalized_and_the_top_of_the_range_is_accepted(cls):
    top = loop_params(cls, seed=np.uint32(2**32 - 1))
    assert type(top.seed) is int and top.seed == 2**32 - 1
    assert loop_params(cls, seed=np.int64(7)).state() == loop_params(cls, seed=7).state()
    assert loop_params(cls, seed=None).seed is None


def test_a_32_bit_overflowing_seed_never_reserves_a_run(tmp_path):
    from _nnx_core_tiny import tiny_batches, tiny_model

    root = tmp_path / "runs"
    with pytest.raises(ValueError, match=r"NNTrainParams\.seed"):
        tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(),
                                         seed=2**32), root=root, verbose=False)
    assert not root.exists()
