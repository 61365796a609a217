"""The configuration layer stands alone (issue 14): params/, enums/, models/, datasets/
and nets/ import only themselves and the foundation — type-only imports included —
with no cycle between their modules, and the specs moved down keep their public paths."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import nnx

SRC = Path(nnx.__file__).parent
CONFIGURATION = ("params", "enums", "models", "datasets", "nets")
BELOW = ("_foundation",)


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _nnx_imports(path: Path) -> set[str]:
    """Every nnx module ``path`` names in an import, wherever the import sits."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "nnx" or name.startswith("nnx.")}


def _configuration_graph() -> dict[str, set[str]]:
    return {_module(path): _nnx_imports(path)
            for package in CONFIGURATION for path in (SRC / package).rglob("*.py")}


def test_configuration_imports_only_itself_and_the_foundation():
    allowed = tuple(f"nnx.{p}" for p in CONFIGURATION + BELOW)
    upward = sorted(
        f"{module} -> {target}"
        for module, targets in _configuration_graph().items()
        for target in targets
        if not any(target == a or target.startswith(a + ".") for a in allowed)
    )
    assert upward == []


def test_configuration_modules_import_no_cycle():
    graph = _configuration_graph()
    known = set(graph)

    def resolve(name: str) -> str:
        while name not in known and "." in name:
            name = name.rpartition(".")[0]
        return name

    edges = {m: {resolve(t) for t in targets} & known - {m} for m, targets in graph.items()}
    cycles = []

    def visit(node: str, path: list[str], done: set[str]) -> None:
        for nxt in sorted(edges[node]):
            if nxt in path:
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in done:
                visit(nxt, [*path, nxt], done)
        done.add(node)

    done: set[str] = set()
    for start in sorted(edges):
        if start not in done:
            visit(start, [start], done)
    assert cycles == []


def test_importing_the_configuration_layer_loads_nothing_above_it():
    code = (
        "import sys\n"
        f"for p in {CONFIGURATION!r}: __import__('nnx.' + p)\n"
        f"ok = {tuple(f'nnx.{p}' for p in CONFIGURATION + BELOW)!r}\n"
        "print(sorted(m for m in sys.modules if m.startswith('nnx.')\n"
        "             and not any(m == o or m.startswith(o + '.') for o in ok)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_the_moved_specs_and_folded_builders_keep_their_public_paths():
    import nnx.metrics
    import nnx.monitors
    import nnx.params
    import nnx.tasks
    from nnx.params.metric import MetricSpec
    from nnx.params.monitor import MonitorSpec, improved
    from nnx.params.optim import NNOptimParamsBuilder
    from nnx.params.scheduler import NNSchedulerParamsBuilder
    from nnx.params.task import TaskSpec
    from nnx.params.trainer import NNTrainerParamsBuilder

    assert nnx.MonitorSpec is nnx.monitors.MonitorSpec is MonitorSpec
    assert nnx.monitors.improved is improved
    assert nnx.MetricSpec is nnx.metrics.MetricSpec is MetricSpec
    assert nnx.TaskSpec is nnx.tasks.TaskSpec is TaskSpec
    assert nnx.NNOptimParamsBuilder is nnx.params.NNOptimParamsBuilder is NNOptimParamsBuilder
    assert nnx.NNSchedulerParamsBuilder is NNSchedulerParamsBuilder
    assert nnx.NNTrainerParamsBuilder is nnx.params.NNTrainerParamsBuilder \
        is NNTrainerParamsBuilder
    assert isinstance(nnx.NNOptimParams.builder(), NNOptimParamsBuilder)
    assert isinstance(nnx.NNSchedulerParams.builder(), NNSchedulerParamsBuilder)
    assert isinstance(nnx.NNTrainerParams.builder(), NNTrainerParamsBuilder)
