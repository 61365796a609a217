"""Every third-party module a distribution's code imports at module level is one of its
declared dependencies (issue 36: nnx-paradigms imported numpy and declared only torch,
working only because nnx-core happens to bring numpy along).

Imports inside functions, ``try`` blocks and ``if TYPE_CHECKING:`` are the lazy,
optional kind (an extra, another add-on through require_distribution) and are left to
the à-la-carte check, which runs each distribution alone.
"""

from __future__ import annotations

import ast
import re
import sys
from importlib import metadata
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
DISTRIBUTIONS = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())


def _normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(dist_dir: Path) -> set[str]:
    project = tomllib.loads((dist_dir / "pyproject.toml").read_text())["project"]
    names = (re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r) for r in project.get("dependencies", []))
    return {_normalize(m.group(0)) for m in names if m}


def _module_level_imports(path: Path) -> set[str]:
    """Top-level package names imported by the module's own top-level statements."""
    found: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("dist_dir", DISTRIBUTIONS, ids=[p.name for p in DISTRIBUTIONS])
def test_module_level_imports_are_declared_dependencies(dist_dir: Path) -> None:
    providers = metadata.packages_distributions()
    stdlib = sys.stdlib_module_names
    declared = _declared(dist_dir)
    undeclared: dict[str, set[str]] = {}
    for path in sorted((dist_dir / "src").rglob("*.py")):
        for module in _module_level_imports(path) - stdlib - {"nnx", "__future__"}:
            dists = {_normalize(d) for d in providers.get(module, [module])}
            if not dists & declared:
                undeclared.setdefault(module, set()).add(str(path.relative_to(dist_dir)))
    assert undeclared == {}, f"{dist_dir.name} imports modules it does not declare: {undeclared}"
