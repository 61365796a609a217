"""LoopState: the training state the loop owns, the epoch commit writes and a resume
restores (spec §4, §14, §14.2) — and the import shape that buys: resume and the commit
know no FitLoop, persistence imports nothing of the engine and has no cycle."""

from __future__ import annotations

import ast
import math
import pathlib
import random
from types import SimpleNamespace

import pytest
import torch

import nnx
from nnx._contracts.precision import ResolvedPrecision
from nnx._engine.epoch_commit import EpochCommit
from nnx._engine.loop_state import LoopState, loader_generators, primary_slot
from nnx._engine.optimizers import build_optimizer
from nnx._engine.resume import ResumePlan, apply_resume, check_resume
from nnx._engine.training_state import UpdateCounters, saved_slots
from nnx._engine.update_engine import OptimizerSlot
from nnx._persistence.resume_status import ResumeStatus
from nnx.callbacks.base import CallbackContext
from nnx.enums.precision import Precision
from nnx.params.optim import NNOptimParams

SRC = pathlib.Path(nnx.__file__).parent


def loop_state(seed: int, *, kind: str = "model") -> tuple[LoopState, torch.nn.Module]:
    torch.manual_seed(seed)
    net = torch.nn.Linear(3, 2)
    optimizer = build_optimizer(net, NNOptimParams())
    name = None if kind == "model" else "main"
    loader = torch.utils.data.DataLoader(
        list(range(8)), batch_size=2, shuffle=True,
        generator=torch.Generator().manual_seed(5))
    ctx = CallbackContext(model=None, run=None, optimizer=optimizer)
    state = LoopState(kind=kind, ctx=ctx, slots={name: OptimizerSlot(name, optimizer,
                                                                     NNOptimParams())},
                      precision=ResolvedPrecision(Precision.FP32, "cpu"), scaler=None,
                      train_loader=loader)
    state.components = {"nnx.update_engine": (UpdateCounters(state).component_spec(),
                                              UpdateCounters(state))}
    return state, net


def trained(state: LoopState, net: torch.nn.Module) -> None:
    """One optimizer step and the counters it moves, as the loop would."""
    net(torch.randn(4, 3)).sum().backward()
    state.primary.optimizer.step()
    state.primary.updates += 1
    state.committed_updates += 1
    state.iter_idx += 4
    state.best_score = 0.25
    next(iter(state.train_loader))  # the loader's generator moves on


def plan_of(net: torch.nn.Module, saved: dict | None) -> ResumePlan:
    checkpoint = SimpleNamespace(state_dict={k: v.clone() for k, v in net.state_dict().items()},
                                 transforms=(), generation=1)
    return ResumePlan(checkpoint, saved, "stateful" if saved else "weights_only", 1, 3,
                      ResumeStatus(mode="stateful"))


def test_the_commits_training_state_resumes_into_a_fresh_loop_state():
    source, source_net = loop_state(1)
    trained(source, source_net)
    saved = EpochCommit(source, run=None, net=source_net, params=None, history=None,
                        attempt=None, phases={}).training_state(0)
    expected_draw = (random.random(), torch.rand(1))  # what follows the saved streams
    target, target_net = loop_state(2)
    plan = plan_of(source_net, saved)
    check_resume(plan, target, target_net)
    apply_resume(plan, target, target_net)
    assert (target.iter_idx, target.committed_updates, target.best_score) == (4, 1, 0.25)
    assert target.ctx.committed_updates == 1  # the one public counter, on the context
    assert target.primary.updates == 1
    assert all(torch.equal(a, b) for a, b in zip(target_net.state_dict().values(),
                                                 source_net.state_dict().values(), strict=True))
    assert (target.primary.optimizer.state_dict()["state"].keys()
            == source.primary.optimizer.state_dict()["state"].keys())
    assert plan.status.restored_components == ["nnx.update_engine"]
    assert (random.random(), torch.rand(1)) == expected_draw  # the RNG hand-over
    [gen] = loader_generators(target.train_loader).values()
    [source_gen] = loader_generators(source.train_loader).values()
    assert torch.equal(gen.get_state(), source_gen.get_state())


def test_a_sidecar_stores_each_counter_once():
    source, source_net = loop_state(1)
    trained(source, source_net)
    saved = EpochCommit(source, run=None, net=source_net, params=None, history=None,
                        attempt=None, phases={}).training_state(0)
    assert saved["components"]["nnx.update_engine"]["state"] == {
        "committed_updates": 1, "iter_idx": 4, "optimizer_updates": {"": 1}}
    assert "committed_updates" not in saved and "updates" not in saved
    assert saved["loop"] == {"planned_n_epochs": 0, "best_score": 0.25}


def test_a_sidecar_without_the_counters_component_restores_its_own_counters():
    """The layout before the component (§14.1): the counters at the top level, in
    ``loop`` and in the optimizer's state; they still resume."""
    source, source_net = loop_state(1)
    trained(source, source_net)
    saved = EpochCommit(source, run=None, net=source_net, params=None, history=None,
                        attempt=None, phases={}).training_state(0)
    del saved["components"]
    saved.update(committed_updates=1, updates=1)
    saved["loop"]["iter_idx"] = 4
    target, target_net = loop_state(2)
    plan = plan_of(source_net, saved)
    with pytest.warns(RuntimeWarning, match="no component state"):
        apply_resume(plan, target, target_net)
    assert (target.iter_idx, target.committed_updates, target.primary.updates) == (4, 1, 1)
    assert plan.status.fresh_components == ["nnx.update_engine"]


def test_a_weights_only_plan_restores_the_weights_and_no_counter():
    source, source_net = loop_state(1)
    trained(source, source_net)
    target, target_net = loop_state(2)
    plan = plan_of(source_net, None)
    apply_resume(plan, target, target_net)
    assert (target.iter_idx, target.committed_updates, target.best_score) == (0, 0, math.inf)
    assert plan.status.fresh_components == ["nnx.update_engine"]


def test_a_failed_restore_puts_the_weights_and_the_rng_back():
    source, source_net = loop_state(1)
    saved = EpochCommit(source, run=None, net=source_net, params=None, history=None,
                        attempt=None, phases={}).training_state(0)
    del saved["rng"]  # the last step of the restore fails
    target, target_net = loop_state(2)
    before = {k: v.clone() for k, v in target_net.state_dict().items()}
    rng = torch.get_rng_state()
    with pytest.raises(KeyError):
        apply_resume(plan_of(source_net, saved), target, target_net)
    assert all(torch.equal(before[k], v) for k, v in target_net.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rng)


def test_a_state_resumes_statefully_only_through_the_loop_kind_that_wrote_it():
    source, source_net = loop_state(1, kind="trainer")
    saved = EpochCommit(source, run=None, net=source_net, params=None, history=None,
                        attempt=None, phases={}).training_state(0)
    assert set(saved["optimizers"]) == {"main"} and saved_slots(source, saved).keys() == {"main"}
    target, target_net = loop_state(2)
    with pytest.raises(ValueError, match=r"written by Trainer\.train"):
        check_resume(plan_of(source_net, saved), target, target_net)


def test_the_update_counters_component_reads_and_writes_the_loop_state():
    state, _ = loop_state(1)
    counters = UpdateCounters(state)
    counters.load_component_state({"committed_updates": 7, "iter_idx": 30,
                                   "optimizer_updates": {"": 7}}, version=1)
    assert (state.committed_updates, state.ctx.committed_updates, state.iter_idx) == (7, 7, 30)
    assert counters.component_state() == {"committed_updates": 7, "iter_idx": 30,
                                          "optimizer_updates": {"": 7}}
    assert primary_slot(state.slots) is state.primary


# -- the import shape ----------------------------------------------------------------------


def _imports(path: pathlib.Path) -> set[str]:
    """Every nnx module ``path`` imports: module level, in functions, under TYPE_CHECKING."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("nnx")}
        elif (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
              and node.module.startswith("nnx")):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names}
    return found


def test_resume_and_the_commit_know_no_fit_loop():
    for name in ("resume", "loop_state", "epoch_commit", "control_signal", "training_state"):
        imported = _imports(SRC / "_engine" / f"{name}.py")
        assert not any(m.startswith("nnx._engine.fit_loop") for m in imported), name
