"""A registered optimizer factory in the Trainer (spec §8, §3.1): it trains beside AdamW
and reloads offline; a resume on a changed config or a missing factory is refused."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from typing import Any

import pytest
import torch
import yaml
from _nnx_core_tiny import Lion, tiny_batches, tiny_model
from _support.trainer import (
    FACTORY_CALLS,
    Probe,
    files,
    full,
    rng,
    same_weights,
    weights,
)

from nnx import (
    NNOptimFactoryParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNTrainerParams,
    OptimizerFactorySpec,
    Trainer,
    supervised_objective,
)
from nnx.components import ComponentRestoreError
from nnx.optimizers import MissingOptimizerFactoryError


def lion(pattern: str = "layers.0.*", betas: tuple[float, float] = (0.9, 0.99)
         ) -> NNOptimFactoryParams:
    return NNOptimFactoryParams(
        factory=OptimizerFactorySpec("test.lion", 1, {"betas": list(betas)}),
        max_lr=3e-3, weight_decay=0.1, param_groups=[NNParamGroupSpec(name_pattern=pattern)])


def adamw(pattern: str = "layers.1.*") -> NNOptimParams:
    return (NNOptimParams.builder().adamw(max_lr=1e-2)
            .param_groups([NNParamGroupSpec(name_pattern=pattern)]).build())


def lion_plan(n_epochs: int = 2, **resume: Any) -> NNTrainerParams:
    builder = (NNTrainerParams.builder().n_epochs(n_epochs).train_loader(tiny_batches(3))
               .optimizer("lion", lion(**resume.pop("lion", {}))).optimizer("adamw", adamw())
               .seed(0))
    if resume:
        builder.resume_from(**resume)
    return builder.build()


# == 2. a registered factory beside a built-in =================================================
RELOAD = textwrap.dedent("""
    import sys
    from nnx import NNOptimFactoryParams, NNOptimParams, NNRun
    from nnx._foundation.plugins import versioned_registry

    assert versioned_registry("nnx.optimizer_factories").versions("test.lion") == []
    run = NNRun.load(sys.argv[1], root=sys.argv[2])
    assert run.id == sys.argv[1] and run.train_params is None
    assert type(run.trainer_params.optims["lion"]) is NNOptimFactoryParams
    assert type(run.trainer_params.optims["adamw"]) is NNOptimParams
    assert "Lion" not in str(sys.modules) and "test_trainer" not in str(sys.modules)
    print(run)
""")


def test_a_registered_lion_trains_beside_adamw_and_reloads_offline(tmp_path):
    model = tiny_model()
    initial = weights(model)
    probe = Probe()
    run = Trainer(model).train(lion_plan(), objective=supervised_objective(), callbacks=[probe],
                               verbose=False, root=tmp_path)
    assert FACTORY_CALLS == [{"betas": (0.9, 0.99)}]  # once, with the read-only config
    opt_lion, opt_adamw = probe.optimizers["lion"], probe.optimizers["adamw"]
    assert type(opt_lion) is Lion and type(opt_adamw) is torch.optim.AdamW
    net = model.net
    assert [p for g in opt_lion.param_groups for p in g["params"]] == list(
        net.layers[0].parameters())
    assert [p for g in opt_adamw.param_groups for p in g["params"]] == list(
        net.layers[1].parameters())
    assert (opt_lion.param_groups[0]["lr"], opt_lion.param_groups[0]["weight_decay"]) == (
        3e-3, 0.1)
    assert all(set(s) == {"exp_avg"} for s in opt_lion.state.values())
    assert [int(s["step"]) for s in opt_adamw.state.values()] == [6, 6]  # 2 epochs × 3 updates
    assert all(not torch.equal(initial[k], v) for k, v in weights(model).items())

    doc = yaml.safe_load((run.path / "run.yaml").read_text(encoding="utf-8"))
    assert doc["trainer"]["optims"]["lion"]["factory"] == {
        "id": "test.lion", "version": 1, "config": {"betas": [0.9, 0.99]}}
    out = subprocess.run([sys.executable, "-c", RELOAD, run.id, str(tmp_path)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert "      lion: test.lion@v1 max_lr=0.003 weight_decay=0.1\n" in out.stdout
    assert "     adamw: ADAMW max_lr=0.01 weight_decay=0.01\n" in out.stdout


def test_a_factory_resume_is_refused_on_a_changed_config_or_a_missing_factory(
        tmp_path, registry, monkeypatch):
    first = Trainer(tiny_model()).train(lion_plan(), objective=supervised_objective(),
                                        verbose=False, root=tmp_path)
    model = tiny_model(seed=5)
    before, before_files, before_rng = weights(model), files(tmp_path), rng()

    def untouched() -> None:
        assert same_weights(weights(model), before)
        assert files(tmp_path) == before_files
        assert rng() == before_rng

    changed = lion_plan(run_id=first.id, checkpoint="last", mode="auto",
                        lion={"betas": (0.95, 0.98)})
    with pytest.raises(ComponentRestoreError) as info:
        Trainer(model).train(changed, objective=supervised_objective(), verbose=False,
                             root=tmp_path)
    assert info.value.problems == [
        "optimizer 'lion' factory: saved test.lion@v1 config {'betas': [0.9, 0.99]}, now "
        "test.lion@v1 config {'betas': [0.95, 0.98]}"]
    untouched()

    monkeypatch.delitem(registry._explicit, "test.lion@v1")
    FACTORY_CALLS.clear()
    same = lion_plan(run_id=first.id, checkpoint="last", mode="auto")
    missing = ("optimizer factory test.lion@v1 is not registered in this process (no version "
               "of 'test.lion' is registered); register it with "
               "nnx.register_optimizer_factory('test.lion', 1, factory) before training")
    with pytest.raises(MissingOptimizerFactoryError, match=full(missing)):
        Trainer(model).train(same, objective=supervised_objective(), verbose=False,
                             root=tmp_path)
    untouched()  # no child run directory
    with pytest.raises(MissingOptimizerFactoryError, match=full(missing)):
        Trainer(model).train(lion_plan(), objective=supervised_objective(), verbose=False,
                             root=tmp_path / "fresh")
    assert not (tmp_path / "fresh").exists()
    assert FACTORY_CALLS == []
    untouched()
