"""The multi-optimizer Trainer (spec §8, §8.1–§8.4, with §2.5 clocks, §3.1 factories, §5).

Everything trains for real on tiny CPU models: a 1-D GAN (a generator G and a
critic D under one ``nn.Module``) for the step-function path, and the shared
tiny classifier for objective runs.
"""

from __future__ import annotations

import hashlib
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from _nnx_core_tiny import Lion, sgd, tiny_batches, tiny_model
from torch import nn

from nnx import (
    Callback,
    Devices,
    Losses,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNModel,
    NNModelParams,
    NNOptimFactoryParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNParams,
    NNRun,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainerParamsBuilder,
    NNTrainParams,
    OptimizerFactorySpec,
    Precision,
    Trainer,
    TrainerStepContext,
    build_optimizer,
    register_optimizer_factory,
    supervised_objective,
)
from nnx._foundation.plugins import versioned_registry
from nnx.components import ComponentRestoreError
from nnx.optimizers import MissingOptimizerFactoryError

EXAMPLES = Path(__file__).resolve().parents[4] / "examples"


# -- a tiny GAN on a 1-D mixture of two Gaussians --------------------------------------------
def mixture(n_batches: int = 4, size: int = 16, *, seed: int = 0) -> list[tuple[torch.Tensor]]:
    """A fixed list of ``(real_samples,)`` batches from 0.5·N(-2, 0.3²) + 0.5·N(2, 0.3²)."""
    g = torch.Generator().manual_seed(seed)
    n = n_batches * size
    centers = torch.tensor([-2.0, 2.0])[torch.randint(0, 2, (n,), generator=g)]
    x = (centers + 0.3 * torch.randn(n, generator=g)).unsqueeze(1)
    return [(x[i:i + size],) for i in range(0, n, size)]


class GAN(nn.Module):
    """G: latent (2) → sample (1); D: sample → real/fake logit. ``forward`` is the critic."""

    latent = 2

    def __init__(self) -> None:
        super().__init__()
        self.G = nn.Sequential(nn.Linear(self.latent, 16), nn.Tanh(), nn.Linear(16, 1))
        self.D = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.D(x)


def gan_model(seed: int = 1) -> NNModel:
    torch.manual_seed(seed)  # resumed runs replace these weights; this only fixes the start
    return NNModel(module=GAN(), params=NNModelParams(device=Devices.CPU,
                                                      loss=Losses.BINARY_CROSS_ENTROPY))


def snapshot(module: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in module.parameters()]


def unchanged(module: nn.Module, before: list[torch.Tensor]) -> bool:
    return all(torch.equal(p, b) for p, b in zip(module.parameters(), before, strict=True))


class GanStep:
    """The §8 recipe: a D step, then a G step, each by its own named optimizer.

    Both losses back-propagate into both halves (the fake batch is not
    detached), so each ``step()`` runs while the other half holds gradients:
    only strict ownership keeps it from moving them.
    """

    def __init__(self) -> None:
        self.checked = 0

    def __call__(self, ctx: TrainerStepContext) -> NNEvaluationDataPoint:
        net, loss_fn = ctx.model.net, ctx.model.loss_fn
        opt_g, opt_d = ctx.optimizers["G"], ctx.optimizers["D"]
        (real,) = ctx.batch
        ones, zeros = torch.ones(len(real), 1), torch.zeros(len(real), 1)
        z = torch.randn(len(real), GAN.latent)

        opt_d.zero_grad()
        d_loss = loss_fn(net.D(real), ones) + loss_fn(net.D(net.G(z)), zeros)
        d_loss.backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.G.parameters())
        g_before, d_before = snapshot(net.G), snapshot(net.D)
        opt_d.step()
        ctx.report_update("D")
        assert unchanged(net.G, g_before), "opt_D moved G"
        assert not unchanged(net.D, d_before), "opt_D did not move D"

        opt_g.zero_grad()
        g_loss = loss_fn(net.D(net.G(z)), ones)
        g_loss.backward()
        assert all(p.grad is not None and p.grad.abs().sum() > 0 for p in net.D.parameters())
        g_before, d_before = snapshot(net.G), snapshot(net.D)
        opt_g.step()
        ctx.report_update("G")
        assert unchanged(net.D, d_before), "opt_G moved D"
        assert not unchanged(net.G, g_before), "opt_G did not move G"
        self.checked += 1
        d, g = float(d_loss.detach()), float(g_loss.detach())
        return NNEvaluationDataPoint(loss=d + g, extra={"d_loss": d, "g_loss": g})


def adam(pattern: str, lr: float = 2e-3) -> NNOptimParams:
    return (NNOptimParams.builder().adam(max_lr=lr, betas=(0.5, 0.999), weight_decay=0.0)
            .param_groups([NNParamGroupSpec(name_pattern=pattern)]).build())


PLATEAU = NNSchedulerParams.builder().reduce_on_plateau(
    min_lr=1e-7, factor=0.5, patience=0, cooldown=0, threshold=1e-3).build()
GAN_OPTIMS = {"G": adam("G.*"), "D": adam("D.*")}
GAN_SCHEDULES = {"G": PLATEAU, "D": PLATEAU}


def gan_builder(n_epochs: int) -> NNTrainerParamsBuilder:
    """The §8 recipe in the builder form (a fixed list of batches, seeded params)."""
    return (NNTrainerParams.builder()
            .n_epochs(n_epochs)
            .train_loader(mixture())
            .optimizer("G", adam("G.*"))
            .optimizer("D", adam("D.*"))
            .scheduler("G", PLATEAU)
            .scheduler("D", PLATEAU)
            .seed(0))


def weights(model: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.net.state_dict().items()}


def same_weights(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def records(run: NNRun) -> list[tuple[Any, ...]]:
    return [(i.epoch, i.iter_idx, i.batch_idx, i.update_count, i.lr, i.train_edp.loss,
             dict(i.train_edp.extra)) for i in run.idps]


def files(root: Path) -> dict[str, str]:
    """Every file under ``root`` (lock files aside) by its SHA-256."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and ".lock" not in p.name}


def rng() -> tuple[Any, ...]:
    state = np.random.get_state()
    return random.getstate(), torch.get_rng_state().tolist(), state[1].tolist(), state[2:]


def full(message: str) -> str:
    """A ``match=`` pattern for exactly ``message``."""
    return f"^{re.escape(message)}$"


class Probe(Callback):
    """Records what Trainer-mode callbacks see."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, int, Any, Any, Any]] = []
        self.optimizers: dict[str, torch.optim.Optimizer] = {}

    def _see(self, hook: str, ctx: Any) -> None:
        self.seen.append((hook, ctx.epoch, ctx.optimizer, ctx.optimizers, ctx.trainer))
        self.optimizers = dict(ctx.optimizers)

    def on_train_begin(self, ctx):
        self._see("train_begin", ctx)

    def on_epoch_end(self, ctx):
        self._see("epoch_end", ctx)

    def on_train_end(self, ctx):
        self._see("train_end", ctx)


# -- a registered optimizer factory ------------------------------------------------------------
FACTORY_CALLS: list[dict[str, Any]] = []


def lion_factory(param_groups, config):
    FACTORY_CALLS.append(dict(config))
    return Lion(param_groups, betas=tuple(config["betas"]))


@pytest.fixture(autouse=True)
def registry(monkeypatch):
    """Every test sees test.lion@v1, and nothing a test (un)registers leaks out of it."""
    names = versioned_registry("nnx._engine.optimizer_factories")._names
    monkeypatch.setattr(names, "_explicit", dict(names._explicit))
    register_optimizer_factory("test.lion", 1, lion_factory)
    FACTORY_CALLS.clear()
    return names


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


# == 1. the GAN recipe of §8 ===================================================================
def test_gan_recipe_steps_each_half_by_its_own_optimizer_and_resumes_bit_for_bit(tmp_path):
    step = GanStep()
    straight_model = gan_model()
    initial = weights(straight_model)
    straight = Trainer(straight_model).train(gan_builder(4).build(), trainer_step_fn=step,
                                             verbose=False, root=tmp_path / "straight")
    assert step.checked == 4 * 4  # every batch of every epoch checked both ownerships
    after = weights(straight_model)
    assert all(not torch.equal(initial[k], after[k]) for k in initial)  # G and D both trained
    assert [r.epoch for r in straight.epoch_records()] == [0, 1, 2, 3]
    assert straight.idps[-1].update_count == 4 * 4 * 2  # one D and one G update per batch

    first_model = gan_model()
    first = Trainer(first_model).train(gan_builder(2).build(), trainer_step_fn=GanStep(),
                                       verbose=False, root=tmp_path / "split")
    resumed_model = gan_model()
    params = gan_builder(2).resume_from(first.id, checkpoint="last", mode="auto").build()
    rest = Trainer(resumed_model).train(params, trainer_step_fn=GanStep(), verbose=False,
                                        root=tmp_path / "split")

    assert rest.id != first.id
    assert [r.epoch for r in rest.epoch_records()] == [2, 3]  # continues from the saved epoch
    status = rest.resume_status
    assert (status.mode, status.source_run, status.source_checkpoint, status.source_epoch) == (
        "stateful", first.id, "last", 1)
    assert same_weights(weights(resumed_model), after)  # K + (N - K) == N, bit for bit
    assert records(rest) == [r for r in records(straight) if r[0] >= 2]
    a = NNCheckpoint.load_training_state(straight.id, root=tmp_path / "straight")
    b = NNCheckpoint.load_training_state(rest.id, root=tmp_path / "split")
    assert a is not None and b is not None
    assert set(a["optimizers"]) == set(b["optimizers"]) == {"G", "D"}
    for name in ("G", "D"):
        sa, sb = a["optimizers"][name], b["optimizers"][name]
        assert sa["schedule"]["scheduler"] == sb["schedule"]["scheduler"]
        assert sa["updates"] == sb["updates"] == 16
        for pa, pb in zip(sa["optimizer"]["state"].values(), sb["optimizer"]["state"].values(),
                          strict=True):
            assert pa.keys() == pb.keys() and all(torch.equal(pa[k], pb[k]) for k in pa)


# == 2. a registered factory beside a built-in =================================================
RELOAD = textwrap.dedent("""
    import sys
    from nnx import NNOptimFactoryParams, NNOptimParams, NNRun
    from nnx._foundation.plugins import versioned_registry

    assert versioned_registry("nnx._engine.optimizer_factories").versions("test.lion") == []
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


# == 3. every refusal of §8.2 ==================================================================
class RegistersUpdateListener(Callback):
    def on_train_begin(self, ctx):
        ctx.update_listeners.append(lambda ctx: None)


def _plan(*optims: tuple[str, Any], **values: Any) -> NNTrainerParams:
    builder = NNTrainerParams.builder().n_epochs(1).train_loader(tiny_batches(2))
    for name, optim in optims:
        builder.optimizer(name, optim)
    for key, value in values.items():
        getattr(builder, key)(value)
    return builder.build()


def _group(pattern: str, lr: float = 0.1, **modifiers: Any) -> NNOptimParams:
    builder = NNOptimParams.builder().sgd(max_lr=lr).param_groups(
        [NNParamGroupSpec(name_pattern=pattern)])
    for key, value in modifiers.items():
        getattr(builder, key)(value)
    return builder.build()


def _noop_step(ctx: TrainerStepContext) -> NNEvaluationDataPoint:
    raise AssertionError("a refused run never calls its step")


TWO = (("a", _group("layers.0.*")), ("b", _group("layers.1.*")))
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


# == 4. §8.3 NNRun integration and the callback context ========================================
def test_run_yaml_has_a_trainer_block_and_callbacks_see_every_optimizer(tmp_path):
    model = gan_model()
    trainer = Trainer(model)
    probe = Probe()
    params = gan_builder(2).build()
    run = trainer.train(params, trainer_step_fn=GanStep(), callbacks=[probe], verbose=False,
                        root=tmp_path)

    doc = yaml.safe_load((run.path / "run.yaml").read_text(encoding="utf-8"))
    assert "trainer" in doc and "train" not in doc
    assert doc["trainer"] == params.state()
    assert sorted(doc["trainer"]["optims"]) == ["D", "G"]
    assert doc["trainer"]["optims"]["G"]["param_groups"] == [{"name_pattern": "G.*"}]
    assert doc["trainer"]["seed"] == 0 and doc["trainer"]["n_epochs"] == 2
    loaded = NNRun.load(run.id, root=tmp_path)
    assert loaded.id == run.id and loaded.train_params is None
    assert loaded.trainer_params.state() == run.trainer_params.state() == params.state()
    assert [r.epoch for r in loaded.epoch_records()] == [0, 1]

    assert [(hook, epoch) for hook, epoch, *_ in probe.seen] == [
        ("train_begin", 0), ("epoch_end", 0), ("epoch_end", 1), ("train_end", 1)]
    opts = probe.optimizers
    assert list(opts) == ["G", "D"] and opts["G"] is not opts["D"]
    for _, _, primary, optimizers, seen_trainer in probe.seen:
        assert optimizers == opts
        assert primary is opts["D"]  # the sorted-first name, not the first inserted
        assert seen_trainer is trainer
    names = {id(p): n for n, p in model.net.named_parameters()}
    assert [names[id(p)] for g in opts["G"].param_groups for p in g["params"]] == [
        "G.0.weight", "G.0.bias", "G.2.weight", "G.2.bias"]
    assert [names[id(p)] for g in opts["D"].param_groups for p in g["params"]] == [
        "D.0.weight", "D.0.bias", "D.2.weight", "D.2.bias"]


# == 5. §8.4 resume checks =====================================================================
def _warmup_decay() -> NNSchedulerParams:
    return NNSchedulerParams.builder().linear_warmup_decay(warmup_steps=1).build()


def _one_cycle() -> NNSchedulerParams:
    return NNSchedulerParams.builder().one_cycle(max_lr=1e-2).build()


def _step_lr() -> NNSchedulerParams:
    return NNSchedulerParams.builder().step(step_size=1).build()


RESUME_REFUSALS = {
    "optimizer_names": (
        {"G": adam("G.*"), "E": adam("D.*")}, {"G": PLATEAU, "E": PLATEAU},
        ComponentRestoreError, "optimizer names: saved ['D', 'G'], now ['E', 'G']"),
    "optimizer_type": (
        {**GAN_OPTIMS, "D": _group("D.*", lr=2e-3)}, GAN_SCHEDULES,
        ComponentRestoreError, "optimizer 'D': saved Adam, now SGD"),
    "scheduler_type": (
        GAN_OPTIMS, {**GAN_SCHEDULES, "D": _step_lr()},
        ComponentRestoreError, "optimizer 'D' schedule: saved REDUCE_LR_ON_PLATEAU, now STEP"),
    "one_cycle_without_total_steps": (
        GAN_OPTIMS, {**GAN_SCHEDULES, "G": _one_cycle()}, ValueError,
        "resuming a ONE_CYCLE schedule needs an explicit total_steps covering the original "
        "and the resumed epochs (or resume_mode='weights_only')"),
    "warmup_decay_without_total_steps": (
        GAN_OPTIMS, {**GAN_SCHEDULES, "G": _warmup_decay()}, ValueError,
        "resuming a LINEAR_WARMUP_DECAY schedule needs an explicit total_steps covering the "
        "original and the resumed epochs (or resume_mode='weights_only')"),
}


@pytest.mark.parametrize("case", list(RESUME_REFUSALS))
def test_a_mismatched_resume_is_refused_before_anything_changes(tmp_path, case):
    first = Trainer(gan_model()).train(gan_builder(1).build(), trainer_step_fn=GanStep(),
                                       verbose=False, root=tmp_path)
    optims, schedules, error, message = RESUME_REFUSALS[case]
    builder = NNTrainerParams.builder().n_epochs(1).train_loader(mixture()).seed(0)
    for name, optim in optims.items():
        builder.optimizer(name, optim)
    for name, schedule in schedules.items():
        builder.scheduler(name, schedule)
    builder.resume_from(first.id, checkpoint="last", mode="auto")
    model = gan_model(seed=7)
    before, before_files, before_rng = weights(model), files(tmp_path), rng()
    step = GanStep()
    with pytest.raises(error) as info:
        Trainer(model).train(builder.build(), trainer_step_fn=step, verbose=False,
                             root=tmp_path)
    if error is ComponentRestoreError:
        assert info.value.problems == [message]
    else:
        assert str(info.value) == message
    assert step.checked == 0
    assert same_weights(weights(model), before)
    assert files(tmp_path) == before_files
    assert rng() == before_rng


def test_a_total_steps_the_resumed_epochs_would_pass_is_refused_before_anything_changes(
        tmp_path):
    one_cycle = NNSchedulerParams.builder().one_cycle(max_lr=1e-2, total_steps=3).build()

    def plan(n_epochs: int, source: str | None = None) -> NNTrainerParams:
        builder = (NNTrainerParams.builder().n_epochs(n_epochs).train_loader(mixture()).seed(0)
                   .optimizer("G", adam("G.*")).optimizer("D", adam("D.*"))
                   .scheduler("G", one_cycle))
        if source is not None:
            builder.resume_from(source, checkpoint="last", mode="auto")
        return builder.build()

    first = Trainer(gan_model()).train(plan(2), trainer_step_fn=GanStep(), verbose=False,
                                       root=tmp_path)
    model = gan_model(seed=7)
    before, before_files, before_rng = weights(model), files(tmp_path), rng()
    step = GanStep()
    with pytest.raises(ComponentRestoreError) as info:  # epochs 2 and 3 would take steps 3, 4
        Trainer(model).train(plan(2, first.id), trainer_step_fn=step, verbose=False,
                             root=tmp_path)
    assert info.value.problems == [
        "optimizer 'G' schedule total_steps (3) does not cover the resumed run: 2 epoch "
        "step(s) taken + 2 planned = 4"]
    assert step.checked == 0 and same_weights(weights(model), before)
    assert files(tmp_path) == before_files and rng() == before_rng
    rest = Trainer(model).train(plan(1, first.id), trainer_step_fn=step, verbose=False,
                                root=tmp_path)  # one more epoch fits exactly
    assert [r.epoch for r in rest.epoch_records()] == [2]


def test_the_same_horizon_check_covers_an_update_clock_under_nnmodel_train(tmp_path):
    one_cycle = (NNSchedulerParams.builder().one_cycle(max_lr=0.1, total_steps=4)
                 .clock("optimizer_update").build())

    def plan(**resume: Any) -> NNTrainParams:
        return NNTrainParams(n_epochs=resume.pop("n_epochs", 2), train_loader=tiny_batches(2),
                             optim=sgd(), scheduler=one_cycle, seed=0, **resume)

    first = tiny_model().train(plan(), verbose=False, root=tmp_path)  # 2 × 2 updates: all 4
    before_files = files(tmp_path)
    with pytest.raises(ComponentRestoreError) as info:
        tiny_model().train(plan(n_epochs=1, resume_from_run_id=first.id), verbose=False,
                           root=tmp_path)
    assert info.value.problems == [
        "optimizer schedule total_steps (4) does not cover the resumed run: 4 optimizer_update "
        "step(s) taken + 2 planned = 6"]
    assert files(tmp_path) == before_files


class FirstEpochWeights(Callback):
    def __init__(self) -> None:
        self.at_start: dict[str, torch.Tensor] | None = None

    def on_epoch_begin(self, ctx):
        if self.at_start is None:
            self.at_start = weights(ctx.model)


def _single(pattern: str = "*") -> NNTrainerParams:
    return _plan(("net", _group(pattern)))


def test_a_checkpoint_resumes_statefully_only_through_its_own_loop(tmp_path):
    model_run = tiny_model().train(NNTrainParams(n_epochs=1, train_loader=tiny_batches(2),
                                                 optim=sgd(), seed=0), verbose=False,
                                   root=tmp_path)
    trainer_run = Trainer(tiny_model()).train(_single(), objective=supervised_objective(),
                                              verbose=False, root=tmp_path)
    hint = "; pass resume_mode='weights_only' to warm-start from its weights alone"

    def trainer_params(source: str, mode: str) -> NNTrainerParams:
        builder = NNTrainerParamsBuilder.from_params(_single())
        return builder.resume_from(source, checkpoint="last", mode=mode).build()

    def model_params(source: str, mode: str) -> NNTrainParams:
        return NNTrainParams(n_epochs=1, train_loader=tiny_batches(2), optim=sgd(), seed=0,
                             resume_from_run_id=source, resume_mode=mode)

    before_files = files(tmp_path)
    model = tiny_model(seed=3)
    before, before_rng = weights(model), rng()
    with pytest.raises(ValueError, match=full(
            "this checkpoint was written by NNModel.train and resumes statefully only through "
            "NNModel.train, not Trainer.train" + hint)):
        Trainer(model).train(trainer_params(model_run.id, "auto"),
                             objective=supervised_objective(), verbose=False, root=tmp_path)
    with pytest.raises(ValueError, match=full(
            "this checkpoint was written by Trainer.train and resumes statefully only through "
            "Trainer.train, not NNModel.train" + hint)):
        model.train(model_params(trainer_run.id, "stateful"), verbose=False, root=tmp_path)
    assert files(tmp_path) == before_files and same_weights(weights(model), before)
    assert rng() == before_rng

    for source, train in (
            (model_run, lambda probe: Trainer(tiny_model(seed=3)).train(
                trainer_params(model_run.id, "weights_only"), objective=supervised_objective(),
                callbacks=[probe], verbose=False, root=tmp_path)),
            (trainer_run, lambda probe: tiny_model(seed=3).train(
                model_params(trainer_run.id, "weights_only"), callbacks=[probe], verbose=False,
                root=tmp_path))):
        probe = FirstEpochWeights()
        warm = train(probe)
        assert warm.resume_status.mode == "weights_only"
        assert warm.resume_status.source_run == source.id
        assert [r.epoch for r in warm.epoch_records()] == [1]
        saved = NNCheckpoint.from_file(source.checkpoints_dir / "last.pt").state_dict
        assert probe.at_start is not None and same_weights(probe.at_start, dict(saved))


# == 6. scheduler timing ======================================================================
def _halving(clock: str) -> NNSchedulerParams:
    return NNSchedulerParams.builder().step(step_size=1, factor=0.5).clock(clock).build()


def _lr(optimizer: torch.optim.Optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"])


class ReportingStep:
    """Per batch: two D updates, then one G update, each reported by name.

    ``trace`` holds (epoch, name, G's LR, D's LR) right after each report.
    With ``own_schedule`` the step also steps G's schedule itself after each
    G update (the §8.2 hand-over under auto_step_schedulers=False).
    """

    def __init__(self, *, own_schedule: bool = False) -> None:
        self.own_schedule = own_schedule
        self.trace: list[tuple[int, str, float, float]] = []

    def __call__(self, ctx: TrainerStepContext) -> NNEvaluationDataPoint:
        net = ctx.model.net
        (real,) = ctx.batch
        opt_g, opt_d = ctx.optimizers["G"], ctx.optimizers["D"]
        if ctx.epoch == 0 and ctx.batch_idx == 0:
            with pytest.raises(ValueError, match=full(
                    "report_update: no optimizer named 'X' (optimizers: 'G', 'D')")):
                ctx.report_update("X")
        loss = torch.zeros(())
        for name in ("D", "D", "G"):
            optimizer = ctx.optimizers[name]
            optimizer.zero_grad()
            loss = net.D(real).pow(2).mean() + net.D(net.G(torch.randn(len(real), 2))).mean()
            loss.backward()
            optimizer.step()
            ctx.report_update(name)
            if name == "G" and self.own_schedule:
                ctx.schedulers["G"].step()
            self.trace.append((ctx.epoch, name, _lr(opt_g), _lr(opt_d)))
        return NNEvaluationDataPoint(loss=float(loss.detach()))


def _clocked(**values: Any) -> NNTrainerParams:
    builder = (NNTrainerParams.builder().n_epochs(2).train_loader(mixture()).seed(0)
               .optimizer("G", _group("G.*")).optimizer("D", _group("D.*"))
               .scheduler("G", _halving("optimizer_update")).scheduler("D", _halving("epoch")))
    for key, value in values.items():
        getattr(builder, key)(value)
    return builder.build()


def test_an_update_clock_steps_once_per_report_of_its_own_optimizer(tmp_path):
    step = ReportingStep()
    run = Trainer(gan_model()).train(_clocked(), trainer_step_fn=step, verbose=False,
                                     root=tmp_path)
    expected, g_updates = [], 0
    for epoch in range(2):
        for _batch in range(4):
            for name in ("D", "D", "G"):
                g_updates += name == "G"
                expected.append((epoch, name, 0.1 * 0.5 ** g_updates, 0.1 * 0.5 ** epoch))
    assert step.trace == expected  # D's reports never step G's clock; D steps per epoch
    state = NNCheckpoint.load_training_state(run.id, root=tmp_path)
    assert state is not None
    g, d = state["optimizers"]["G"], state["optimizers"]["D"]
    assert (g["updates"], g["schedule"]["steps"], g["schedule"]["clock"]) == (
        8, 8, "optimizer_update")
    assert (d["updates"], d["schedule"]["steps"], d["schedule"]["clock"]) == (16, 2, "epoch")
    assert _lr_of(run, "D") == 0.1 * 0.5 ** 2
    assert run.idps[-1].update_count == 24


def _lr_of(run: NNRun, name: str) -> float:
    state = NNCheckpoint.load_training_state(run.id, root=run.root)
    assert state is not None
    return float(state["optimizers"][name]["optimizer"]["param_groups"][0]["lr"])


def test_without_auto_stepping_only_the_step_function_moves_a_schedule(tmp_path):
    hands_off = ReportingStep()
    run = Trainer(gan_model()).train(_clocked(auto_step_schedulers=False),
                                     trainer_step_fn=hands_off, verbose=False,
                                     root=tmp_path / "a")
    assert {(g, d) for _, _, g, d in hands_off.trace} == {(0.1, 0.1)}  # nothing stepped
    assert (_lr_of(run, "G"), _lr_of(run, "D")) == (0.1, 0.1)
    assert yaml.safe_load((run.path / "run.yaml").read_text())["trainer"][
        "auto_step_schedulers"] is False

    own = ReportingStep(own_schedule=True)
    run = Trainer(gan_model()).train(_clocked(auto_step_schedulers=False),
                                     trainer_step_fn=own, verbose=False, root=tmp_path / "b")
    g_steps, expected = 0, []
    for epoch in range(2):
        for _batch in range(4):
            for name in ("D", "D", "G"):
                g_steps += name == "G"
                expected.append((epoch, name, 0.1 * 0.5 ** g_steps, 0.1))
    assert own.trace == expected  # exactly the function's own steps; D never at the epoch end
    state = NNCheckpoint.load_training_state(run.id, root=tmp_path / "b")
    assert state is not None
    g, d = state["optimizers"]["G"]["schedule"], state["optimizers"]["D"]["schedule"]
    assert (g["scheduler"]["last_epoch"], d["scheduler"]["last_epoch"]) == (8, 0)
    assert (g["steps"], d["steps"]) == (0, 0)  # NNx took none of them


class Events(Callback):
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_optimizer_update(self, ctx, event):
        lrs = tuple(_lr(optimizer) for optimizer in ctx.optimizers.values())
        self.events.append((event.optimizer, event.update_index, event.update_count,
                            event.epoch, event.batch_idx, event.microbatches, lrs))


def test_an_objective_run_steps_every_optimizer_once_per_commit_with_one_event_each(tmp_path):
    probe, events = Probe(), Events()
    params = (NNTrainerParams.builder().n_epochs(2).train_loader(tiny_batches(3)).seed(0)
              .optimizer("first", NNOptimParams.builder().adam(max_lr=0.1).accumulate_grad(2)
                         .param_groups([NNParamGroupSpec(name_pattern="layers.0.*")]).build())
              .optimizer("second", NNOptimParams.builder().adam(max_lr=0.1).accumulate_grad(2)
                         .param_groups([NNParamGroupSpec(name_pattern="layers.1.*")]).build())
              .scheduler("first", _halving("optimizer_update"))
              .scheduler("second", _halving("optimizer_update"))
              .build())
    run = Trainer(tiny_model()).train(params, objective=supervised_objective(),
                                      callbacks=[probe, events], verbose=False, root=tmp_path)
    # 3 microbatches per epoch in windows of 2 + 1: commits close on batches 1 and 2.
    commits = [(0, 1, 2), (0, 2, 1), (1, 1, 2), (1, 2, 1)]
    expected = []
    for k, (epoch, batch_idx, microbatches) in enumerate(commits, start=1):
        for name in ("first", "second"):  # both events fire before either schedule steps
            lr = 0.1 * 0.5 ** (k - 1)
            expected.append((name, k, k, epoch, batch_idx, microbatches, (lr, lr)))
    assert events.events == expected
    for name in ("first", "second"):
        optimizer = probe.optimizers[name]
        assert _lr(optimizer) == 0.1 * 0.5 ** 4
        assert [int(s["step"]) for s in optimizer.state.values()] == [4, 4]
    assert [i.update_count for i in run.idps] == [0, 1, 2, 2, 3, 4]


# == 7. accumulation through the engine equals the full batch ================================
def _uneven() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(4)
    x, y = torch.randn(10, 4, generator=g), torch.randint(0, 3, (10,), generator=g)
    return [(x[:3], y[:3]), (x[3:8], y[3:8]), (x[8:], y[8:])]


def test_accumulating_uneven_microbatches_equals_the_full_batch_update(tmp_path):
    batches = _uneven()
    optim = (NNOptimParams.builder().sgd(max_lr=0.1, momentum=0.9).accumulate_grad(2)
             .param_groups([NNParamGroupSpec(name_pattern="*")]).build())
    engine = tiny_model()
    Trainer(engine).train(
        NNTrainerParams.builder().n_epochs(2).train_loader(batches).optimizer("net", optim)
        .build(), objective=supervised_objective(), verbose=False, root=tmp_path / "trainer")

    # The windows are batches 0 + 1 (3 + 5 rows) and batch 2 (2 rows): each one full batch.
    full_batches = [(torch.cat([batches[0][0], batches[1][0]]),
                     torch.cat([batches[0][1], batches[1][1]])), batches[2]]
    reference = tiny_model()
    reference.train(NNTrainParams(n_epochs=2, train_loader=full_batches, scheduler=None,
                                  optim=NNOptimParams.builder().sgd(max_lr=0.1, momentum=0.9)
                                  .build()), verbose=False, root=tmp_path / "model")
    a, b = weights(engine), weights(reference)
    assert not same_weights(a, weights(tiny_model()))
    assert a.keys() == b.keys()
    for key in a:
        assert torch.allclose(a[key], b[key], atol=1e-6), key


# == the runnable examples =====================================================================
@pytest.mark.parametrize(("script", "shows"), [
    ("09_gan_with_trainer.py", ["         G: ADAM max_lr=0.01 weight_decay=0\n",
                                "         D: ADAM max_lr=0.01 weight_decay=0\n",
                                "4000 generated samples: "]),
    ("optimizer_factories.py", ["   encoder: example.lion@v1 max_lr=0.001 weight_decay=0.1\n",
                                "      head: ADAMW max_lr=0.01 weight_decay=0.01\n"]),
])
def test_the_example_runs(tmp_path, script, shows):
    out = subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=tmp_path,
                         capture_output=True, text=True, check=False, timeout=300)
    assert out.returncode == 0, out.stderr
    assert all(line in out.stdout for line in shows), out.stdout
    assert list(tmp_path.iterdir()) == []  # everything went to a temporary directory


@pytest.mark.parametrize("auto", [True, False])
def test_lr_monitor_traces_the_primary_update_clock_unless_the_step_owns_timing(tmp_path, auto):
    """§5: LRMonitor.update_history follows the primary (sorted-first) optimizer's
    update-clock steps; under auto_step_schedulers=False NNx steps nothing, so it stays
    empty while the per-epoch history still records the LR."""
    from nnx import LRMonitor

    clock = NNSchedulerParams.builder().step(step_size=1, factor=0.5).clock(
        "optimizer_update").build()

    def step(ctx: TrainerStepContext) -> NNEvaluationDataPoint:
        for name in ("a", "b"):
            ctx.optimizers[name].step()
            ctx.report_update(name)
        return NNEvaluationDataPoint(loss=1.0)

    monitor = LRMonitor()
    params = (NNTrainerParams.builder().n_epochs(2).train_loader(tiny_batches(2))
              .optimizer("a", _group("layers.0.*", 0.4)).optimizer("b", _group("layers.1.*"))
              .scheduler("a", clock).auto_step_schedulers(auto).build())
    Trainer(tiny_model()).train(params, trainer_step_fn=step, callbacks=[monitor],
                                root=tmp_path, verbose=False)
    if auto:
        assert monitor.update_history == [(1, 0.2), (3, 0.1), (5, 0.05), (7, 0.025)]
        assert monitor.history == pytest.approx([0.1, 0.025])
    else:
        assert monitor.update_history == [] and monitor.history == [0.4, 0.4]


# == §6.4: declared metrics and a named monitor through the builder ==========================
def test_a_builder_declared_metric_and_monitor_decide_the_trainers_best(tmp_path):
    from nnx import Checkpoints, MetricSpec, MonitorSpec

    # The validation loss falls every epoch (the legacy rule would pick epoch 3); the
    # declared accuracy peaks at epoch 1, and the monitor follows the accuracy.
    losses, accuracies = [4.0, 3.0, 2.0, 1.0], [0.5, 0.6, 0.55, 0.58]

    def scripted(ctx):
        return NNEvaluationDataPoint(loss=losses[ctx.epoch_idx],
                                     metrics={"acc": accuracies[ctx.epoch_idx]})

    best_epochs: list[int] = []

    class BestProbe(Callback):
        def on_epoch_end(self, ctx):  # read BEST once the epoch has committed
            ctx.defer(lambda c: best_epochs.append(NNCheckpoint.load(
                c.run.id, Checkpoints.BEST, root=c.run.root).epoch))

    params = (NNTrainerParams.builder().n_epochs(4).train_loader(tiny_batches(2))
              .val_loader(tiny_batches(1, seed=1)).optimizer("net", sgd())
              .metrics([MetricSpec("accuracy", name="acc")])
              .monitor(MonitorSpec(metric="acc", min_delta=0.01))
              .build())
    run = Trainer(tiny_model()).train(params, objective=supervised_objective(),
                                      eval_step_fn=scripted, callbacks=[BestProbe()],
                                      verbose=False, root=tmp_path)
    records = run.epoch_records()
    assert [r.selection["improved"] for r in records] == [True, True, False, False]
    assert [r.selection["direction"] for r in records] == ["max"] * 4
    assert best_epochs == [0, 1, 1, 1]  # BEST written exactly on the improving epochs
    best = run.best_checkpoint()
    assert best is not None and best.epoch == 1 and best.monitor_value == pytest.approx(0.6)
    state = yaml.safe_load((run.path / "run.yaml").read_text())["trainer"]
    assert state["metrics"] == [{"id": "accuracy", "version": 1, "name": "acc"}]
    assert state["monitor"]["metric"] == "acc"


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


def test_a_trainer_step_context_answers_epoch_idx_beside_epoch(tmp_path):
    seen: list[tuple[int, int]] = []

    def step(ctx: TrainerStepContext) -> NNEvaluationDataPoint:
        seen.append((ctx.epoch, ctx.epoch_idx))
        return NNEvaluationDataPoint(loss=1.0, error=1.0)

    Trainer(tiny_model()).train(_plan(*TWO, n_epochs=2), trainer_step_fn=step, verbose=False,
                                root=tmp_path)
    assert seen == [(0, 0), (0, 0), (1, 1), (1, 1)]
