"""The round-trip and omit-when-default contracts (spec §2.1, §2.2), property-tested."""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle

import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from nnx import (
    Activations,
    Devices,
    Losses,
    MetricSpec,
    Nets,
    NNConvParams,
    NNModelParams,
    NNMoEParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNParams,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainParams,
    NNViTParams,
    Optims,
    Precision,
    Schedulers,
    TaskSpec,
    run_id,
)

settings.register_profile("nnx", max_examples=60, deadline=None)
settings.load_profile("nnx")

counts = st.integers(min_value=1, max_value=64)
rates = st.floats(min_value=1e-6, max_value=1.0, allow_nan=False)
decays = st.one_of(st.just(0.0), st.floats(min_value=1e-6, max_value=0.5))
probs = st.floats(min_value=0.0, max_value=1.0)
betas = st.tuples(st.floats(0.0, 0.999), st.floats(0.0, 0.999))
patterns = st.sampled_from(["*", "*.bias", "layers.0.*", "encoder.*bias", "head.weight"])


@st.composite
def group_specs(draw):
    mode = draw(st.sampled_from(["none", "lr", "mult"]))
    return NNParamGroupSpec(
        name_pattern=draw(patterns),
        lr=draw(rates) if mode == "lr" else None,
        lr_multiplier=draw(rates) if mode == "mult" else None,
        weight_decay=draw(st.none() | decays),
    )


@st.composite
def optim_params(draw):
    name = draw(st.sampled_from(list(Optims)))
    if name.is_adam_family:
        momentum = draw(st.none() | betas)
        eps = draw(st.none() | st.floats(1e-10, 1e-3))
    elif name is Optims.SGD_NESTEROV:
        momentum, eps = draw(st.floats(0.01, 0.99)), None
    else:
        momentum, eps = draw(st.none() | st.floats(0.0, 0.99)), None
    return NNOptimParams(
        name=name,
        max_lr=draw(rates),
        momentum=momentum,
        weight_decay=draw(decays),
        eps=eps,
        grad_clip_norm=draw(st.none() | st.floats(0.1, 10.0)),
        accumulate_grad_batches=draw(counts),
        param_groups=draw(st.none() | st.lists(group_specs(), min_size=1, max_size=4)),
    )


@st.composite
def scheduler_params(draw):
    kind = draw(st.sampled_from([None, *Schedulers]))
    plateau = kind in (None, Schedulers.REDUCE_LR_ON_PLATEAU)
    fields = dict(
        kind=kind,
        min_lr=draw(st.floats(0.0, 1e-3)),
        factor=draw(st.floats(0.01, 0.99)),
        patience=draw(st.integers(0, 20)),
        cooldown=draw(st.integers(0, 5)),
        threshold=draw(st.floats(0.0, 1e-2)),
        clock="epoch" if plateau else draw(st.sampled_from(["epoch", "optimizer_update"])),
    )
    if kind is Schedulers.STEP:
        fields["step_size"] = draw(counts)
    if kind is Schedulers.COSINE_ANNEALING:
        fields["T_max"] = draw(st.none() | counts)
    if kind is Schedulers.ONE_CYCLE:
        fields["max_lr"] = draw(st.none() | rates)
        fields["total_steps"] = draw(st.none() | counts)
    if kind is Schedulers.LINEAR_WARMUP_DECAY:
        warm = draw(st.none() | counts)  # None: a tenth of the horizon (§14.2)
        fields["warmup_steps"] = warm
        fields["total_steps"] = draw(st.none() | st.integers(warm or 1, (warm or 1) + 100))
    return NNSchedulerParams(**fields)


@st.composite
def net_params(draw):
    hidden = draw(st.lists(counts, max_size=4))
    per_layer = draw(st.booleans())
    return NNParams(
        input_dim=draw(counts),
        output_dim=draw(counts),
        hidden_dims=hidden,
        dropout_prob=draw(probs),
        activation=draw(st.sampled_from(list(Activations))),
        activations=(
            tuple(draw(st.sampled_from(list(Activations))) for _ in hidden) if per_layer else None
        ),
        dropout_probs=tuple(draw(probs) for _ in hidden) if per_layer else None,
        n_heads=draw(st.none() | counts),
    )


@st.composite
def model_params(draw):
    task = draw(st.sampled_from([None, "categorical", "multilabel", "regression"]))
    loss, spec = Losses.CROSS_ENTROPY, None
    if task == "categorical":
        loss = draw(st.sampled_from([Losses.CROSS_ENTROPY, Losses.NEGATIVE_LOG_LIKELIHOOD]))
        spec = TaskSpec.categorical(draw(st.integers(2, 10)),
                                    ignore_index=draw(st.none() | st.just(-100)))
    elif task == "multilabel":
        loss = Losses.BINARY_CROSS_ENTROPY
        spec = TaskSpec.multilabel(draw(counts), threshold=draw(st.floats(0.05, 0.95)))
    elif task == "regression":
        loss = Losses.MEAN_SQUARED_ERROR
        spec = TaskSpec.regression(draw(counts))
    precision = draw(st.sampled_from([None, *Precision]))
    return NNModelParams(
        net=draw(st.sampled_from([Nets.FEED_FWD, Nets.CONV, Nets.VIT, Nets.MOE])),
        loss=loss,
        device=draw(st.sampled_from(list(Devices))),
        precision=precision,
        mixed_precision=precision is None and draw(st.booleans()),
        task=spec,
    )


@st.composite
def train_params(draw):
    resume = draw(st.booleans())
    return NNTrainParams(
        n_epochs=draw(counts),
        optim=draw(optim_params()),
        scheduler=draw(st.none() | scheduler_params()),
        seed=draw(st.none() | st.integers(0, 2**31)),
        data_id=draw(st.none() | st.text(min_size=1, max_size=8)),
        save_phase_checkpoints=draw(st.booleans()),
        resume_from_run_id="a" * 32 if resume else None,
        resume_from_checkpoint=draw(st.sampled_from([None, "best", "q2"])) if resume else None,
        overwrite_existing=draw(st.booleans()),
        train_loader=[(1, 2)],
    )


@st.composite
def trainer_params(draw):
    names = draw(st.lists(st.sampled_from(["G", "D", "actor", "critic"]), min_size=1,
                          max_size=3, unique=True))
    optims = {n: draw(optim_params()) for n in names}
    scheduled = draw(st.lists(st.sampled_from(names), unique=True))
    return NNTrainerParams(
        n_epochs=draw(counts),
        optims=optims,
        schedulers={n: draw(scheduler_params()) for n in scheduled},
        seed=draw(st.none() | st.integers(0, 100)),
        data_id=draw(st.none() | st.sampled_from(["split-a", "split-b"])),
        auto_step_schedulers=draw(st.booleans()),
    )


conv_params = st.builds(
    NNConvParams, input_dim=st.sampled_from([64, 256]), output_dim=counts,
    conv_channels=st.lists(st.integers(1, 16), min_size=1, max_size=2),
    in_channels=st.integers(1, 3), hidden_dims=st.lists(counts, max_size=2),
)
vit_params = st.builds(
    NNViTParams, output_dim=counts, image_size=st.sampled_from([8, 16]),
    patch_size=st.sampled_from([2, 4]), d_model=st.sampled_from([16, 32]),
    n_heads=st.sampled_from([1, 2, 4]), n_layers=st.integers(1, 3),
)
moe_params = st.builds(
    NNMoEParams, input_dim=counts, output_dim=counts, hidden_dims=st.lists(counts, max_size=2),
    num_experts=st.integers(2, 6), top_k=st.just(1),
    aux_loss_weight=st.floats(0.0, 1.0),
)

ALL = {
    NNParams: net_params(),
    NNConvParams: conv_params,
    NNViTParams: vit_params,
    NNMoEParams: moe_params,
    NNModelParams: model_params(),
    NNOptimParams: optim_params(),
    NNParamGroupSpec: group_specs(),
    NNSchedulerParams: scheduler_params(),
    NNTrainParams: train_params(),
    NNTrainerParams: trainer_params(),
}


@pytest.mark.parametrize("cls", list(ALL), ids=lambda c: c.__name__)
def test_round_trip_through_yaml(cls):
    @given(ALL[cls])
    def check(obj):
        state = obj.state()
        # run.yaml is YAML: the state must survive a dump/load with no custom tags.
        reloaded = yaml.safe_load(yaml.safe_dump(state, sort_keys=False))
        rebuilt = cls.from_state(reloaded)
        assert type(rebuilt) is cls
        assert rebuilt.state() == state
        assert json.dumps(rebuilt.state(), sort_keys=True) == json.dumps(state, sort_keys=True)
        assert list(rebuilt.state()) == list(state)  # same key order too

    check()


def test_frozen_kw_only_slotted():
    for cls in ALL:
        params = dataclasses.fields(cls)
        assert all(f.kw_only for f in params), cls
        assert "__slots__" in cls.__dict__, cls
    p = NNOptimParams()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.max_lr = 1.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        NNOptimParams(Optims.SGD)  # type: ignore[misc]  # positional: refused


def test_runtime_fields_never_enter_state():
    loader = [(1, 2)]
    p = NNTrainParams(
        train_loader=loader, val_loader=loader, extra_metrics={"m": lambda a, b: 0.0},
        overwrite_existing=True, resume_from_run_id="r1", resume_mode="stateful",
    )
    state = p.state()
    for runtime in ("train_loader", "val_loader", "extra_metrics", "overwrite_existing",
                    "resume_from_run_id", "resume_from_checkpoint", "resume_mode"):
        assert runtime not in state
    assert state["parent_run_id"] == "r1" and state["parent_checkpoint"] == "last"
    rebuilt = NNTrainParams.from_state(state)
    # Lineage only: never a resume request or its mode.
    assert rebuilt.resume_from_run_id is None and rebuilt.resume_mode == "auto"
    assert rebuilt.parent_run_id == "r1"
    with pytest.raises(ValueError, match=r"unknown field.*'train_loader'"):
        NNTrainParams.from_state({**state, "train_loader": None})


# Each optional field is omitted at its default, and only its default (§2.2).
OMITTED_AT_DEFAULT = [
    (NNModelParams, {}, "mixed_precision", True),
    (NNModelParams, {}, "precision", Precision.BF16),
    (NNModelParams, {}, "device", Devices.CPU),
    (NNModelParams, {"loss": Losses.MEAN_SQUARED_ERROR}, "task", TaskSpec.regression(1)),
    (NNOptimParams, {}, "param_groups", (NNParamGroupSpec(name_pattern="*.bias"),)),
    (NNOptimParams, {}, "eps", 1e-6),
    (NNOptimParams, {}, "momentum", (0.5, 0.999)),
    (NNOptimParams, {}, "grad_clip_norm", 1.0),
    (NNOptimParams, {}, "accumulate_grad_batches", 4),
    (NNSchedulerParams, {"kind": Schedulers.STEP, "step_size": 2}, "clock", "optimizer_update"),
    (NNSchedulerParams, {"kind": Schedulers.ONE_CYCLE}, "total_steps", 100),
    (NNSchedulerParams, {"kind": Schedulers.ONE_CYCLE}, "max_lr", 0.1),
    (NNSchedulerParams, {}, "kind", Schedulers.COSINE_ANNEALING),
    (NNTrainParams, {}, "seed", 0),
    (NNTrainParams, {}, "data_id", "split-a"),
    (NNTrainParams, {}, "save_phase_checkpoints", False),
    (NNTrainParams, {}, "parent_run_id", "abc"),
    (NNTrainerParams, {"optims": {"G": NNOptimParams()}}, "schedulers",
     {"G": NNSchedulerParams()}),
    (NNTrainerParams, {"optims": {"G": NNOptimParams()}}, "seed", 7),
    (NNTrainerParams, {"optims": {"G": NNOptimParams()}}, "auto_step_schedulers", False),
    (NNTrainerParams, {"optims": {"G": NNOptimParams()}}, "save_phase_checkpoints", False),
    (NNParams, {"input_dim": 3, "output_dim": 2}, "n_heads", 2),
    (NNParams, {"input_dim": 3, "output_dim": 2, "hidden_dims": (4,)}, "activations",
     (Activations.TANH,)),
    (NNParams, {"input_dim": 3, "output_dim": 2, "hidden_dims": (4,)}, "dropout_probs", (0.5,)),
    (NNParamGroupSpec, {"name_pattern": "*"}, "weight_decay", 0.0),
    (NNMoEParams, {"input_dim": 3, "output_dim": 2}, "aux_loss_weight", 0.5),
    (NNConvParams, {"input_dim": 256, "output_dim": 2}, "padding", 0),
]


@pytest.mark.parametrize(("cls", "base", "field", "value"), OMITTED_AT_DEFAULT,
                         ids=[f"{c.__name__}.{f}" for c, _, f, _ in OMITTED_AT_DEFAULT])
def test_omit_when_default(cls, base, field, value):
    default = cls(**base)
    assert field not in default.state()
    changed = cls(**base, **{field: value})
    assert field in changed.state()
    assert cls.from_state(changed.state()).state() == changed.state()


def test_per_layer_lists_repeating_the_net_wide_value_are_omitted():
    p = NNParams(input_dim=3, output_dim=2, hidden_dims=(4, 4), activation=Activations.GELU,
                 activations=(Activations.GELU, Activations.GELU), dropout_prob=0.1,
                 dropout_probs=(0.1, 0.1))
    plain = NNParams(input_dim=3, output_dim=2, hidden_dims=(4, 4), activation=Activations.GELU,
                     dropout_prob=0.1)
    assert p.state() == plain.state()
    # The rebuilt object need not equal the original, only its state (§2.1).
    assert NNParams.from_state(p.state()) == plain
    assert p.layer_activations == plain.layer_activations


def test_always_fields_are_written_at_their_default():
    assert NNOptimParams().state() == {"name": "ADAM", "max_lr": 1e-3, "weight_decay": 0.0}
    assert NNModelParams().state() == {"net": "FEED_FWD", "loss": "CROSS_ENTROPY"}
    assert NNSchedulerParams().state() == {
        "min_lr": 0.0, "factor": 0.1, "patience": 10, "cooldown": 0, "threshold": 1e-4,
    }


def test_plateau_kind_has_one_spelling():
    explicit = NNSchedulerParams(kind=Schedulers.REDUCE_LR_ON_PLATEAU)
    assert explicit.kind is None and explicit.state() == NNSchedulerParams().state()


def test_resolve_from_state_picks_the_nets_params_class():
    for params in (NNParams(input_dim=3, output_dim=2),
                   NNConvParams(input_dim=64, output_dim=2),
                   NNViTParams(output_dim=3, image_size=8, patch_size=4, d_model=16, n_heads=2),
                   NNMoEParams(input_dim=3, output_dim=2, hidden_dims=(4,))):
        net = {NNParams: Nets.FEED_FWD, NNConvParams: Nets.CONV, NNViTParams: Nets.VIT,
               NNMoEParams: Nets.MOE}[type(params)]
        rebuilt = NNParams.resolve_from_state(params.state(), net)
        assert type(rebuilt) is type(params) and rebuilt.state() == params.state()
        assert NNParams.resolve_from_state(params.state(), net.name) == rebuilt


def test_from_state_refuses_unknown_fields_and_bad_members():
    with pytest.raises(ValueError, match=r"NNOptimParams\.from_state: unknown field\(s\) 'lr'"):
        NNOptimParams.from_state({"name": "ADAM", "lr": 0.1})
    with pytest.raises(ValueError, match=r"Optims has no member 'LION'"):
        NNOptimParams.from_state({"name": "LION"})
    with pytest.raises(TypeError, match="needs a mapping"):
        NNOptimParams.from_state([("name", "ADAM")])  # type: ignore[arg-type]


def test_trainer_maps_are_read_only_snapshots():
    optims = {"G": NNOptimParams(), "D": NNOptimParams(max_lr=2e-4)}
    p = NNTrainerParams(optims=optims)
    before = p.state()
    optims["X"] = NNOptimParams()
    del optims["G"]
    assert p.state() == before and list(p.optims) == ["G", "D"]
    with pytest.raises(TypeError):
        p.optims["Y"] = NNOptimParams()  # type: ignore[index]
    with pytest.raises(TypeError):
        del p.optims["G"]  # type: ignore[attr-defined]
    # state() sorts names; runtime order is kept for optimizer construction.
    assert list(p.state()["optims"]) == ["D", "G"]
    replaced = dataclasses.replace(p, n_epochs=3)
    assert replaced.optims is not p.optims and dict(replaced.optims) == dict(p.optims)


def row_count(outputs, targets):  # module-level: an extra metric pickle can name
    return float(len(targets))


COPIES = {"deepcopy": copy.deepcopy, "pickle": lambda p: pickle.loads(pickle.dumps(p))}


@pytest.mark.parametrize("cls", list(ALL), ids=lambda c: c.__name__)
@pytest.mark.parametrize("how", list(COPIES))
def test_every_params_class_deep_copies_and_pickles_to_the_same_state(cls, how):
    @given(ALL[cls])
    def check(obj):
        again = COPIES[how](obj)
        assert type(again) is cls and again == obj and again.state() == obj.state()

    check()


@pytest.mark.parametrize("how", list(COPIES))
def test_loop_params_with_loaders_and_maps_copy_with_the_same_run_id(how):
    loader = [(torch.ones(2, 3), torch.zeros(2))]
    train = NNTrainParams(n_epochs=2, train_loader=loader, val_loader=loader,
                          extra_metrics={"rows": row_count}, resume_from_run_id="r1",
                          metrics=(MetricSpec("acme.topk", 1, {"k": 3, "w": [1, 2]}),))
    trainer = NNTrainerParams(optims={"G": NNOptimParams(), "D": NNOptimParams(max_lr=2e-4)},
                              schedulers={"G": NNSchedulerParams()}, train_loader=loader,
                              extra_metrics={"rows": row_count})
    model = NNModelParams()
    for params, side in ((train, "train"), (trainer, "trainer")):
        again = COPIES[how](params)
        assert again.state() == params.state()
        assert run_id(model=model, **{side: again}) == run_id(model=model, **{side: params})
        assert again.train_loader is not loader and torch.equal(again.train_loader[0][0],
                                                                loader[0][0])
        assert dict(again.extra_metrics) == {"rows": row_count}
        with pytest.raises(TypeError):  # still a read-only snapshot
            again.extra_metrics["x"] = row_count  # type: ignore[index]
    again = COPIES[how](trainer)
    assert list(again.optims) == ["G", "D"] and again.optims["D"] == trainer.optims["D"]
    assert COPIES[how](train).resume_from_run_id == "r1"


def test_with_loaders_keep_the_state():
    p = NNTrainParams(n_epochs=2)
    loader = [("x", "y")]
    q = p.with_train_loader(loader).with_val_loader(loader)
    assert q.train_loader is loader and q.val_loader is loader and q.state() == p.state()


def test_lineage_rules():
    with pytest.raises(ValueError, match="resume_from_checkpoint needs resume_from_run_id"):
        NNTrainParams(resume_from_checkpoint="last")
    with pytest.raises(ValueError, match="contradicts resume_from_run_id"):
        NNTrainParams(resume_from_run_id="a", parent_run_id="b")
    with pytest.raises(ValueError, match="resume_mode must be one of"):
        NNTrainParams(resume_from_run_id="a", resume_mode="eager")
    p = NNTrainParams(resume_from_run_id="a", resume_from_checkpoint="best", resume_mode="stateful")
    assert (p.parent_run_id, p.parent_checkpoint) == ("a", "best")
    assert dataclasses.replace(p, n_epochs=2).parent_checkpoint == "best"


def test_model_params_rules():
    with pytest.raises(ValueError, match=r"set either precision .* not both"):
        NNModelParams(precision=Precision.FP16, mixed_precision=True)
    with pytest.raises(ValueError, match="MEAN_SQUARED_ERROR does not suit a categorical task"):
        NNModelParams(loss=Losses.MEAN_SQUARED_ERROR, task=TaskSpec.categorical(3))
    with pytest.raises(ValueError, match="mixed_precision must be a bool"):
        NNModelParams(mixed_precision=1)  # type: ignore[arg-type]
    state = NNModelParams(loss=Losses.BINARY_CROSS_ENTROPY,
                          task=TaskSpec.multilabel(5, threshold=0.4)).state()
    assert state["task"] == {"version": 1, "kind": "multilabel", "num_outputs": 5,
                             "threshold": 0.4}
