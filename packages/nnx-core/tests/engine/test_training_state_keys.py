"""The training state's keys are spelled in one core module (issue 37): the commit, the
resume and the bundles read and write a checkpoint's sidecar through
``nnx._engine.training_state``, never by string literal."""

from __future__ import annotations

import ast
import pathlib

import nnx

SRC = pathlib.Path(nnx.__file__).parent
SCHEMA = SRC / "_engine" / "training_state.py"
# The keys only the sidecar (or its counters' component) uses. Left out, saying why:
# ``iter_idx`` / ``epoch`` are also the history records' fields (the journal, idps.csv);
# ``planned_n_epochs`` / ``completed_epoch`` are also the manifest position's, which
# persistence reads torch-free below the engine; ``components`` is also a plan's field
# and the bundle reader's (persistence); ``optimizer_factory`` is also an entry-point kind.
KEYS = {"committed_updates", "loop_kind", "optimizer_updates", "optimizer_class",
        "param_names", "loaders", "rng", "scaler", "optimizers", "best_score", "global_step",
        "nnx.update_engine"}


def _spelled(path: pathlib.Path) -> set[str]:
    """The keys ``path`` spells as a whole string constant, outside its ``__all__``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    exported = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            exported |= {id(c) for c in ast.walk(node.value)}
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and node.value in KEYS and id(node) not in exported}


def test_no_core_module_but_the_schema_spells_a_training_state_key():
    found = {path.relative_to(SRC).as_posix(): sorted(keys)
             for path in SRC.rglob("*.py") if path != SCHEMA
             for keys in [_spelled(path)] if keys}
    assert found == {}


def test_the_schema_spells_every_key():
    assert _spelled(SCHEMA) == KEYS


#: The manifest position's keys persistence reads without the sidecar: spelled once, in
#: a torch-free module below the engine (the schema above writes them by name).
POSITION = SRC / "_persistence" / "point_position.py"
POSITION_KEYS = {"completed_epoch", "planned_n_epochs", "owes"}


def test_the_position_keys_are_spelled_only_by_their_module():
    found = {}
    for path in SRC.rglob("*.py"):
        if path == POSITION:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        keys = {node.value for node in ast.walk(tree)
                if isinstance(node, ast.Constant) and node.value in POSITION_KEYS}
        if keys:
            found[path.relative_to(SRC).as_posix()] = sorted(keys)
    assert found == {}
    spelled = {node.value for node in ast.walk(ast.parse(POSITION.read_text()))
               if isinstance(node, ast.Constant) and node.value in POSITION_KEYS}
    assert spelled == POSITION_KEYS
