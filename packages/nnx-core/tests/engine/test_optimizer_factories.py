"""Registered optimizer factories: resolve, construct, persist, reload, resume (spec §3.1)."""

from __future__ import annotations

import copy
import hashlib
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
import yaml
from _nnx_core_tiny import Lion
from torch import nn

from nnx import (
    NNCheckpoint,
    NNDataset,
    NNModel,
    NNOptimFactoryParams,
    NNOptimParams,
    NNOptimParamsBuilder,
    NNParamGroupSpec,
    NNParams,
    NNTrainerParams,
    NNTrainParams,
    OptimizerFactorySpec,
    build_optimizer,
    build_param_groups,
    register_optimizer_factory,
)
from nnx._foundation.plugins import versioned_registry
from nnx.components import ComponentRestoreError
from nnx.optimizers import MissingOptimizerFactoryError, resolve_optimizer_factory

CALLS: list[tuple[list[dict], object]] = []


def lion(param_groups, config):
    CALLS.append((param_groups, config))
    return Lion(param_groups, betas=tuple(config.get("betas", (0.9, 0.99))))


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    """Each test sees acme.lion@v1 and nothing it registers leaks into another test."""
    names = versioned_registry("nnx.optimizer_factories")._names
    monkeypatch.setattr(names, "_explicit", dict(names._explicit))
    register_optimizer_factory("acme.lion", 1, lion)
    CALLS.clear()


def spec(version=1, **config) -> OptimizerFactorySpec:
    return OptimizerFactorySpec("acme.lion", version, config or {"betas": [0.9, 0.99]})


def lion_params(**changes) -> NNOptimFactoryParams:
    return NNOptimFactoryParams(**{"factory": spec(), "max_lr": 3e-3, "weight_decay": 0.1,
                                   **changes})


def dataset() -> NNDataset:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 5, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return NNDataset(x, y, val_proportion=0.25, batch_sizes=(16, None, None), seed=7)


def model() -> NNModel:
    torch.manual_seed(11)
    return NNModel(net_params=NNParams(input_dim=5, output_dim=2, hidden_dims=(8,)))


def plan(optim, **changes) -> NNTrainParams:
    data = dataset()
    return NNTrainParams(**{"n_epochs": 2, "train_loader": data.train_loader,
                            "val_loader": data.val_loader, "optim": optim, "seed": 0,
                            **changes})


class EncoderHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Linear(3, 3)
        self.head = nn.Linear(3, 2)


def per_parameter(groups, net) -> dict[str, tuple[float, float]]:
    names = {id(p): n for n, p in net.named_parameters()}
    return {names[id(p)]: (g["lr"], g["weight_decay"]) for g in groups for p in g["params"]}


# -- the spec and the params ----------------------------------------------------------------
def test_spec_state_label_and_read_only_config():
    s = OptimizerFactorySpec("acme.lion", np.int64(2), {"betas": [0.9, np.float32(0.5)],
                                                       "nested": {"k": (1, 2)}, "n": np.int64(3)})
    assert s.version == 2 and type(s.version) is int and s.label == "acme.lion@v2"
    assert s.state() == {"id": "acme.lion", "version": 2,
                         "config": {"betas": [0.9, 0.5], "n": 3, "nested": {"k": [1, 2]}}}
    assert s.config["betas"] == (0.9, 0.5) and type(s.config["betas"][1]) is float
    assert type(s.config["n"]) is int and s.config["nested"]["k"] == (1, 2)
    with pytest.raises(TypeError):
        s.config["n"] = 4  # type: ignore[index]
    with pytest.raises(TypeError):
        s.config["nested"]["k"] = 1  # type: ignore[index]
    assert OptimizerFactorySpec.from_state(s.state()) == s
    assert hash(OptimizerFactorySpec.from_state(s.state())) == hash(s)
    assert OptimizerFactorySpec("a", 1).state() == {"id": "a", "version": 1, "config": {}}


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"id": "", "version": 1}, "id must be a non-empty string"),
    ({"id": "a@v1", "version": 1}, "without '@'"),
    ({"id": lambda: 0, "version": 1}, "register_optimizer_factory"),
    ({"id": "a", "version": 0}, r"version must be an integer >= 1"),
    ({"id": "a", "version": True}, r"version must be an integer >= 1"),
    ({"id": "a", "version": 1.0}, r"version must be an integer >= 1"),
    ({"id": "a", "version": 1, "config": [1]}, "must be a mapping"),
    ({"id": "a", "version": 1, "config": {"fn": lambda: 0}}, r"config\.fn: function"),
    ({"id": "a", "version": 1, "config": {"a": [{"b": print}]}}, r"config\.a\[0\]\.b"),
    ({"id": "a", "version": 1, "config": {"x": float("nan")}}, "non-finite"),
    ({"id": "a", "version": 1, "config": {1: 2}}, "keys must be strings"),
])
def test_spec_refuses_code_and_bad_identity_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        OptimizerFactorySpec(**kwargs)


def test_factory_params_validate_like_builtins_and_round_trip():
    p = lion_params(grad_clip_norm=1.0, accumulate_grad_batches=2,
                    param_groups=[NNParamGroupSpec(name_pattern="*.bias", weight_decay=0.0)])
    assert p.state() == {
        "factory": {"id": "acme.lion", "version": 1, "config": {"betas": [0.9, 0.99]}},
        "max_lr": 3e-3, "weight_decay": 0.1, "grad_clip_norm": 1.0,
        "accumulate_grad_batches": 2, "param_groups": [{"name_pattern": "*.bias",
                                                         "weight_decay": 0.0}]}
    back = NNOptimFactoryParams.from_state(p.state())
    assert back == p and back.state() == p.state() and isinstance(back.param_groups, tuple)
    assert pickle.loads(pickle.dumps(p)) == p and copy.deepcopy(p) == p
    for changes, match in [({"max_lr": -1.0}, r"NNOptimFactoryParams\.max_lr"),
                           ({"weight_decay": float("inf")}, r"NNOptimFactoryParams\.weight_decay"),
                           ({"grad_clip_norm": 0.0}, r"NNOptimFactoryParams\.grad_clip_norm"),
                           ({"accumulate_grad_batches": 0}, "accumulate_grad_batches"),
                           ({"param_groups": []}, "at least one NNParamGroupSpec"),
                           ({"param_groups": ["*.bias"]}, r"param_groups\[0\]")]:
        with pytest.raises(ValueError, match=match):
            lion_params(**changes)


def test_a_callable_factory_is_refused_and_there_is_no_builder():
    with pytest.raises(ValueError, match=r"factory must be an OptimizerFactorySpec.*lambda"):
        NNOptimFactoryParams(factory=lambda groups, config: None, max_lr=1e-3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="callable factory"):
        register_optimizer_factory("acme.none", 1, "lion")  # type: ignore[arg-type]
    assert not hasattr(NNOptimFactoryParams, "builder")
    with pytest.raises(TypeError, match="takes an NNOptimParams; got NNOptimFactoryParams"):
        NNOptimParamsBuilder.from_params(lion_params())  # type: ignore[arg-type]


def test_train_and_trainer_params_tell_factories_from_builtins():
    train = NNTrainParams(optim=lion_params())
    assert NNTrainParams.from_state(train.state()).optim == lion_params()
    adam = NNOptimParams.builder().adam(max_lr=1e-3).param_groups(
        [NNParamGroupSpec(name_pattern="D.*")]).build()
    g = lion_params(param_groups=[NNParamGroupSpec(name_pattern="G.*")])
    trainer = NNTrainerParams.builder().optimizer("G", g).optimizer("D", adam).build()
    back = NNTrainerParams.from_state(trainer.state())
    assert back.optims == {"G": g, "D": adam}
    assert type(back.optims["G"]) is NNOptimFactoryParams
    assert type(back.optims["D"]) is NNOptimParams
    with pytest.raises(ValueError, match="NNOptimParams or NNOptimFactoryParams"):
        NNTrainParams(optim=spec())  # type: ignore[arg-type]


# -- resolve and construct ----------------------------------------------------------------
def test_param_groups_reach_the_factory_exactly_as_for_builtins():
    net = EncoderHead()
    groups = [NNParamGroupSpec(name_pattern="encoder.*bias", lr_multiplier=0.01, weight_decay=0.0),
              NNParamGroupSpec(name_pattern="encoder.*", lr_multiplier=0.01),
              NNParamGroupSpec(name_pattern="*.bias", weight_decay=0.0)]
    opt = build_optimizer(net, lion_params(max_lr=1e-3, weight_decay=5e-4, param_groups=groups))
    assert isinstance(opt, Lion) and len(CALLS) == 1
    received, config = CALLS[0]
    assert per_parameter(received, net) == {
        "encoder.bias": (1e-5, 0.0), "encoder.weight": (1e-5, 5e-4),
        "head.bias": (1e-3, 0.0), "head.weight": (1e-3, 5e-4)}
    builtin = NNOptimParams(max_lr=1e-3, weight_decay=5e-4, param_groups=groups)
    assert per_parameter(received, net) == per_parameter(build_param_groups(net, builtin), net)
    assert config["betas"] == (0.9, 0.99)
    net.encoder.weight.requires_grad_(False)  # frozen parameters are dropped
    build_optimizer(net, lion_params(param_groups=groups))
    assert "encoder.weight" not in per_parameter(CALLS[-1][0], net)


def test_strict_ownership_applies_to_factories():
    net = EncoderHead()
    owned = lion_params(param_groups=[NNParamGroupSpec(name_pattern="head.*")])
    build_optimizer(net, owned, strict_param_groups=True)
    assert set(per_parameter(CALLS[-1][0], net)) == {"head.weight", "head.bias"}
    CALLS.clear()
    nothing = lion_params(param_groups=[NNParamGroupSpec(name_pattern="decoder.*")])
    with pytest.raises(ValueError, match=r"strict.*match no trainable parameter"):
        build_optimizer(net, nothing, strict_param_groups=True)
    assert CALLS == []  # failed before the factory ran
    build_optimizer(net, nothing)  # non-strict: everything joins the default group
    assert set(per_parameter(CALLS[-1][0], net)) == {n for n, _ in net.named_parameters()}


def test_config_arrives_read_only_with_tuples_and_plain_numbers():
    s = OptimizerFactorySpec("acme.lion", 1, {"betas": [np.float64(0.8), 0.9],
                                              "sched": {"steps": [np.int32(1), 2]}})
    build_optimizer(nn.Linear(2, 2), NNOptimFactoryParams(factory=s, max_lr=1e-3))
    config = CALLS[-1][1]
    assert config["betas"] == (0.8, 0.9) and type(config["betas"][0]) is float
    assert config["sched"]["steps"] == (1, 2) and type(config["sched"]["steps"][0]) is int
    with pytest.raises(TypeError):
        config["betas"] = ()


def test_resolution_names_the_registered_versions():
    assert resolve_optimizer_factory(spec()) is lion
    with pytest.raises(MissingOptimizerFactoryError,
                       match=r"registered versions of 'acme\.lion': v1"):
        resolve_optimizer_factory(spec(version=3))
    with pytest.raises(LookupError, match=r"no version of 'acme\.nope' is registered"):
        resolve_optimizer_factory(OptimizerFactorySpec("acme.nope", 1))


@pytest.mark.parametrize(("factory_id", "version", "match"), [
    ("acme.nope", 1, "no version of 'acme.nope' is registered"),
    ("acme.lion", 4, "acme.lion@v4 is not registered.*registered versions of 'acme.lion': v1"),
])
def test_unknown_factory_fails_before_any_run_directory(tmp_path, factory_id, version, match):
    params = lion_params(factory=OptimizerFactorySpec(factory_id, version))
    with pytest.raises(MissingOptimizerFactoryError, match=match):
        model().train(plan(params), verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def _not_an_optimizer(groups, config):
    return object()


def _drops_one(groups, config):
    return Lion([{**groups[0], "params": groups[0]["params"][1:]}, *groups[1:]])


def _adds_foreign(groups, config):
    return Lion([*groups, {"params": [nn.Parameter(torch.zeros(3))]}])


def _duplicates(groups, config):
    opt = Lion(groups)
    opt.param_groups[0]["params"].append(opt.param_groups[0]["params"][0])
    return opt


@pytest.mark.parametrize(("factory", "match"), [
    (_not_an_optimizer, "returned object, not a torch.optim.Optimizer"),
    (_drops_one, r"exactly the 4 parameter\(s\).*missing layers\.0\.weight"),
    (_adds_foreign, r"foreign <Parameter \(3,\) not in the net>"),
    (_duplicates, r"duplicated layers\.0\.weight"),
])
def test_a_bad_factory_result_fails_before_any_run_directory(tmp_path, factory, match):
    register_optimizer_factory("acme.bad", 1, factory)
    params = lion_params(factory=OptimizerFactorySpec("acme.bad", 1))
    with pytest.raises(ValueError, match=match):
        model().train(plan(params), verbose=False, root=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


# -- persist, reload ------------------------------------------------------------------------
RELOAD = textwrap.dedent("""
    import sys
    from nnx import NNOptimFactoryParams, NNRun
    from nnx._foundation.plugins import versioned_registry

    run = NNRun.load(sys.argv[1], root=sys.argv[2])
    assert isinstance(run.train_params.optim, NNOptimFactoryParams)
    assert versioned_registry("nnx.optimizer_factories").versions("acme.lion") == []
    assert "Lion" not in sys.modules and "test_optimizer_factories" not in str(sys.modules)
    print(run)
""")


def test_train_persists_the_spec_and_reloads_offline(tmp_path):
    run = model().train(plan(lion_params()), verbose=False, root=tmp_path)
    assert len(CALLS) == 1  # called once, before the run was reserved
    text = (run.path / "run.yaml").read_text(encoding="utf-8")
    optim = yaml.safe_load(text)["train"]["optim"]
    assert optim == {"factory": {"id": "acme.lion", "version": 1,
                                 "config": {"betas": [0.9, 0.99]}},
                     "max_lr": 3e-3, "weight_decay": 0.1}
    assert "lion" not in text.replace("acme.lion", "") and "python" not in text
    state = NNCheckpoint.load_training_state(run.id, root=tmp_path)
    assert state is not None and state["optimizer_class"] == "Lion"
    assert state["optimizer_factory"] == optim["factory"]

    out = subprocess.run([sys.executable, "-c", RELOAD, run.id, str(tmp_path)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "optimizer: acme.lion@v1 max_lr=0.003 weight_decay=0.1" in out.stdout
    assert "ADAM" not in out.stdout and "momentum" not in out.stdout


def test_builtin_runs_record_no_factory(tmp_path):
    run = model().train(plan(NNOptimParams.builder().adam(max_lr=3e-2).build()), verbose=False,
                        root=tmp_path)
    state = NNCheckpoint.load_training_state(run.id, root=tmp_path)
    assert state is not None and state["optimizer_factory"] is None
    assert "factory" not in yaml.safe_load((run.path / "run.yaml").read_text())["train"]["optim"]


# -- resume -----------------------------------------------------------------------------------
def _snapshot(root):
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and ".lock" not in p.name}


def test_resume_requires_the_same_factory_identity(tmp_path):
    first = model().train(plan(lion_params()), verbose=False, root=tmp_path)
    register_optimizer_factory("acme.lion", 2, lion)
    before = _snapshot(tmp_path)

    def refused(optim, match):
        with pytest.raises(ComponentRestoreError, match=match):
            model().train(plan(optim, resume_from_run_id=first.id), verbose=False, root=tmp_path)
        assert _snapshot(tmp_path) == before

    refused(lion_params(factory=spec(version=2)),
            r"optimizer factory: saved acme\.lion@v1 .*now acme\.lion@v2")
    refused(lion_params(factory=spec(betas=[0.9, 0.999])),
            r"optimizer factory: saved acme\.lion@v1")
    refused(NNOptimParams.builder().adam(max_lr=3e-3).build(),
            r"saved acme\.lion@v1 .*now a built-in optimizer")

    more = model().train(plan(lion_params(), resume_from_run_id=first.id), verbose=False,
                         root=tmp_path)
    assert more.resume_status.mode == "stateful"
    assert [r.epoch for r in more.epoch_records()] == [2, 3]


def test_resume_refuses_a_builtin_to_factory_switch_of_the_same_class(tmp_path):
    adam = NNOptimParams.builder().adam(max_lr=3e-2).build()
    first = model().train(plan(adam), verbose=False, root=tmp_path)
    register_optimizer_factory("acme.adam", 1, lambda groups, config: torch.optim.Adam(groups))
    before = _snapshot(tmp_path)
    as_factory = NNOptimFactoryParams(factory=OptimizerFactorySpec("acme.adam", 1), max_lr=3e-2)
    with pytest.raises(ComponentRestoreError) as info:
        model().train(plan(as_factory, resume_from_run_id=first.id), verbose=False,
                      root=tmp_path)
    # Same class (Adam), same groups: only the recorded factory identity tells them apart.
    assert info.value.problems == [
        "optimizer factory: saved a built-in optimizer, now acme.adam@v1 config {}"]
    assert _snapshot(tmp_path) == before
