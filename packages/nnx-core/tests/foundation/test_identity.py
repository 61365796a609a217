"""The run id (spec §4, §4.3): md5 of the canonical configuration, pinned by golden ids.

If a golden id below changes, an existing run directory became unfindable:
fix the change (omit the new field at its default), never the constant.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nnx import (
    Activations,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNParams,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainParams,
    run_id,
)
from nnx._foundation.hashing import canonical_bytes
from nnx._foundation.identity import run_identity


def base():
    return dict(
        model=NNModelParams(),
        net=NNParams(input_dim=4, output_dim=3, hidden_dims=(16,)),
        train=NNTrainParams(n_epochs=5),
    )


def rich_train():
    optim = (NNOptimParams.builder().adamw(max_lr=3e-4, betas=(0.9, 0.95))
             .param_groups([NNParamGroupSpec(name_pattern="*.bias", weight_decay=0.0)])
             .grad_clip(1.0).accumulate_grad(2).build())
    schedule = (NNSchedulerParams.builder().linear_warmup_decay(warmup_steps=10, total_steps=100)
                .clock("optimizer_update").build())
    return NNTrainParams(n_epochs=4, optim=optim, scheduler=schedule, seed=42, data_id="split-a")


def gan_trainer():
    g = NNOptimParams.builder().adam(max_lr=2e-4, betas=(0.5, 0.999)).param_groups(
        [NNParamGroupSpec(name_pattern="G.*")]).build()
    d = NNOptimParams.builder().adam(max_lr=2e-4, betas=(0.5, 0.999)).param_groups(
        [NNParamGroupSpec(name_pattern="D.*")]).build()
    return NNTrainerParams.builder().n_epochs(10).optimizer("G", g).optimizer("D", d).scheduler(
        "D", NNSchedulerParams(factor=0.5, patience=2)).build()


GOLDEN = {
    "plain": "d036944b1d47c2a593f3b4bba9993aed",
    "salted": "d66ff73196c3fce8acb1bf6526b63089",
    "rich": "b679b73ca184be04092cf3d506c59749",
    "trainer": "86888d26aa6d206fda7f38ad39f714b6",
}


def ids() -> dict[str, str]:
    b = base()
    return {
        "plain": run_id(**b),
        "salted": run_id(**b, salt="replicate-2"),
        "rich": run_id(model=b["model"], net=NNParams(
            input_dim=4, output_dim=3, hidden_dims=(16, 8), activation=Activations.GELU,
            dropout_prob=0.1), train=rich_train()),
        "trainer": run_id(model=b["model"], train=NNTrainParams(n_epochs=10),
                          trainer=gan_trainer()),
    }


def test_canonical_document_of_the_plain_run():
    doc = run_identity(**base())
    assert canonical_bytes(doc) == (
        b'{"model":{"loss":"CROSS_ENTROPY","net":"FEED_FWD"},'
        b'"net":{"activation":"RELU","dropout_prob":0.0,"hidden_dims":[16],"input_dim":4,'
        b'"output_dim":3},'
        b'"train":{"n_epochs":5,"optim":{"max_lr":0.001,"name":"ADAM","weight_decay":0.0},'
        b'"scheduler":{"cooldown":0,"factor":0.1,"min_lr":0.0,"patience":10,'
        b'"threshold":0.0001}}}'
    )


@pytest.mark.parametrize("which", list(GOLDEN))
def test_golden_run_ids(which):
    assert ids()[which] == GOLDEN[which]


def test_ids_are_md5_hex():
    for value in ids().values():
        assert len(value) == 32 and int(value, 16) >= 0


def test_salt_rules():
    b = base()
    assert run_id(**b, salt=None) == run_id(**b)  # None adds nothing
    assert "salt" not in run_identity(**b)
    assert run_identity(**b, salt="s")["salt"] == "s"
    assert run_id(**b, salt="a") != run_id(**b, salt="b") != run_id(**b)
    for bad in (1, 2.5, b"s", ["s"], True):
        with pytest.raises(TypeError, match="salt must be a non-empty string or None"):
            run_id(**b, salt=bad)
    with pytest.raises(ValueError, match="salt must be a non-empty string"):
        run_id(**b, salt="")


def test_runtime_fields_never_change_the_id():
    b = base()
    loaded = dict(b, train=NNTrainParams(
        n_epochs=5, train_loader=[(1, 2)], val_loader=[(3, 4)], overwrite_existing=True,
        extra_metrics={"m": lambda y, p: 0.0}))
    assert run_id(**loaded) == run_id(**b)


def test_numpy_integers_hash_like_ints():
    b = base()
    numpy_net = NNParams(input_dim=np.int64(4), output_dim=np.int32(3),
                         hidden_dims=[np.int64(16)])
    assert run_id(**dict(b, net=numpy_net)) == run_id(**b)
    numpy_train = NNTrainParams(n_epochs=np.int64(5))
    assert run_id(**dict(b, train=numpy_train)) == run_id(**b)


def test_builder_and_constructor_agree_on_the_id():
    direct = NNOptimParams(max_lr=3e-4, momentum=(0.9, 0.95), weight_decay=0.0)
    built = NNOptimParams.builder().adam(max_lr=3e-4, betas=(0.9, 0.95)).build()
    b = base()
    assert run_id(**dict(b, train=NNTrainParams(n_epochs=5, optim=direct))) == run_id(
        **dict(b, train=NNTrainParams(n_epochs=5, optim=built)))


def test_trainer_branches_over_different_data_get_distinct_ids():
    b = base()
    builder = NNTrainerParams.builder().optimizer("head", NNOptimParams())
    a = run_id(model=b["model"], train=b["train"], trainer=builder.copy().data_id("a").build())
    c = run_id(model=b["model"], train=b["train"], trainer=builder.copy().data_id("b").build())
    assert a != c


def test_transforms_enter_only_when_present():
    b = base()
    assert run_id(**b, transforms=()) == run_id(**b)
    recipe = {"id": "nnx.low_rank", "version": 1, "targets": ["layers.0"], "rank": 2}
    assert run_identity(**b, transforms=[recipe])["transforms"] == [recipe]
    assert run_id(**b, transforms=[recipe]) != run_id(**b)


@given(st.integers(1, 10_000), st.integers(1, 100))
def test_same_config_same_id(n_epochs, width):
    def build():
        return run_id(model=NNModelParams(), net=NNParams(input_dim=width, output_dim=2),
                      train=NNTrainParams(n_epochs=n_epochs))

    assert build() == build()
