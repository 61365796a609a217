"""The fit loop stays a short training loop (issue 37): few methods, a short module, and
no rank branch — which process persists and how processes agree is the process
session's (nnx._engine.process_session), a single process being one more session."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import torch

import nnx._engine.fit_loop as fit_loop
import nnx._engine.fit_run as fit_run
from nnx._engine.distributed import DistributedSession
from nnx._engine.process_session import ProcessSession, SingleProcess, open_session

#: Names whose test in an ``if`` would make the loop branch on the process's rank.
RANK_NAMES = {"is_main", "rank", "world_size", "dist", "distributed", "ddp_net", "session"}


def _tree(module) -> ast.Module:
    return ast.parse(Path(module.__file__).read_text())


def _loop_class(tree: ast.Module) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "FitLoop")


def test_the_loop_class_and_its_module_stay_small():
    source = Path(fit_loop.__file__).read_text()
    methods = [n for n in _loop_class(ast.parse(source)).body
               if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    assert len(methods) <= 20, [m.name for m in methods]
    assert len(source.splitlines()) <= 350


def _rank_branches(tree: ast.Module) -> list[int]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.IfExp, ast.While)):
            names = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.test) if isinstance(n, ast.Attribute)}
            if names & RANK_NAMES:
                found.append(node.lineno)
    return found


def test_neither_the_loop_nor_the_fit_lifetime_branches_on_the_rank():
    assert _rank_branches(_tree(fit_loop)) == []
    assert _rank_branches(_tree(fit_run)) == []


def test_the_rank_branch_finder_sees_a_planted_branch():
    planted = ast.parse("if self.session.is_main:\n    pass\nx = 1 if dist is None else 2\n")
    assert _rank_branches(planted) == [1, 3]


def test_a_single_process_session_gives_every_trivial_answer():
    session: ProcessSession = SingleProcess()
    loader = [1, 2, 3]
    assert session.is_main and (session.rank, session.world_size) == (0, 1)
    assert session.distributed is None  # the per-batch code sums nothing
    assert session.shard(loader, seed=0) is loader
    assert session.wrap(torch.nn.Linear(1, 1)) is None  # the forward is the net's own
    assert session.any(True) is True and session.any(False) is False
    value = object()
    assert session.broadcast(value) is value
    assert session.on_main(lambda: value, "do it") is value
    assert session.verbosity(None) is None and session.verbosity(True) is True
    state = {"n": 3}
    session.reduce_state(state)
    assert state == {"n": 3}
    session.close(completed=True)


def test_a_fit_without_distributed_opens_a_single_process_session():
    assert isinstance(open_session(None, torch.device("cpu")), SingleProcess)


def test_a_single_process_raises_its_own_failure_from_on_main_unchanged():
    def fails() -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match=r"^disk full$"):
        SingleProcess().on_main(fails, "write")


def test_the_ddp_session_is_a_process_session():
    """Structural: every member the loop calls exists on the DDP session too."""
    members = [m for m in vars(ProcessSession) if not m.startswith("_")]
    missing = [m for m in members if not hasattr(DistributedSession, m)
               and m not in DistributedSession.__init__.__code__.co_names]
    assert missing == []
