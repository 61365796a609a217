"""Generate nnx-core's install-hint catalog from every distribution's entry points.

Each nnx distribution's ``[project.entry-points."nnx.*"]`` tables are the only
list of its names, and its ``src/nnx/<sub>/`` packages the only list of its
subpackages. This tool reads them (every ``packages/*`` distribution, the
reference plugin, and ``tools/planned_names.toml`` for distributions the design
plans but the workspace does not build yet) and writes the tables nnx-core
consults after a name or an ``import nnx.<sub>`` failed to resolve, to say
``pip install <distribution>``. nnx-core's own names are skipped: core is always
installed.

    uv run python tools/gen_catalog.py           # rewrite the generated module
    uv run python tools/gen_catalog.py --check   # exit 1 with the diff when it is stale

Needs only the standard library (Python 3.11+ for tomllib).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import tomllib

if __package__ in (None, ""):  # run as a script: make tools._generated importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools._generated import settle

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / "packages"
# The reference plugin is catalogued too, so the "absent add-on" path is tested end to
# end with a real distribution (tests-integration/test_plugin_mechanics.py).
EXTRAS = (ROOT / "tests-integration" / "example-plugin",)
PLANNED = ROOT / "tools" / "planned_names.toml"
OUT = PACKAGES / "nnx-core" / "src" / "nnx" / "_foundation" / "_catalog_generated.py"
CORE = "nnx-core"
GROUP_PREFIX = "nnx."

Providers = dict[str, dict[str, str]]  # entry-point group -> name -> distribution
#: The key of tools/planned_names.toml that lists a planned distribution's subpackages.
PLANNED_SUBPACKAGES = "subpackages"


class CatalogError(Exception):
    """Two distributions claim one name, or a source file is malformed."""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(pyproject: Path) -> tuple[str, dict[str, list[str]]]:
    """A distribution's name and its ``nnx.*`` entry-point groups -> names."""
    project = tomllib.loads(pyproject.read_text())["project"]
    groups = project.get("entry-points", {})
    return normalize(project["name"]), {
        group: list(names) for group, names in groups.items() if group.startswith(GROUP_PREFIX)
    }


def distribution_dirs(packages: Path, extras: tuple[Path, ...] = EXTRAS) -> list[Path]:
    """Every distribution directory: ``packages/*`` with a pyproject, then ``extras``."""
    found = sorted(p for p in packages.iterdir() if (p / "pyproject.toml").is_file())
    return [*found, *(p for p in extras if (p / "pyproject.toml").is_file())]


def subpackages(dist_dir: Path) -> list[str]:
    """``nnx.<sub>`` for every ``src/nnx/<sub>/__init__.py`` the distribution ships."""
    return sorted(f"nnx.{p.parent.name}" for p in (dist_dir / "src" / "nnx").glob("*/__init__.py"))


def planned(path: Path) -> dict[str, dict[str, list[str]]]:
    """Distribution -> group (or ``subpackages``) -> names, for distributions not built
    yet."""
    if not path.is_file():
        return {}
    table = tomllib.loads(path.read_text())
    return {normalize(dist): {g: list(n) for g, n in groups.items()}
            for dist, groups in table.items()}


def collect(dirs: list[Path], planned_names: dict[str, dict[str, list[str]]]) -> Providers:
    """Group -> name -> distribution, and ``subpackages`` -> ``nnx.<sub>`` ->
    distribution; a distribution still planned while built (started, not complete)
    announces its built names and its planned ones."""
    sources: dict[str, dict[str, list[str]]] = {}
    for d in dirs:
        name, groups = declared(d / "pyproject.toml")
        if name in sources:
            raise CatalogError(f"two directories declare the distribution {name}")
        sources[name] = {**groups, PLANNED_SUBPACKAGES: subpackages(d)}
    for dist, groups in planned_names.items():
        built = sources.setdefault(dist, {})
        for group, names in groups.items():  # a started one keeps its planned names too
            built[group] = sorted({*built.get(group, []), *names})
    providers: Providers = {}
    for dist, groups in sorted(sources.items()):
        if dist == CORE:
            continue
        for group, names in groups.items():
            if group == PLANNED_SUBPACKAGES:
                _claim(providers.setdefault(PLANNED_SUBPACKAGES, {}), group, names, dist)
                continue
            if not group.startswith(GROUP_PREFIX):
                raise CatalogError(f"{dist}: {group!r} is not an nnx entry-point group")
            _claim(providers.setdefault(group, {}), group, names, dist)
    return providers


def _claim(table: dict[str, str], group: str, names: list[str], dist: str) -> None:
    for entry in names:
        other = table.setdefault(entry, dist)
        if other != dist:
            raise CatalogError(f"{group} {entry!r} is declared by both {other} and "
                               f"{dist}; one name has one provider")


def render(providers: Providers) -> str:
    lines = [
        "# GENERATED by tools/gen_catalog.py from every packages/*/pyproject.toml's",
        '# [project.entry-points."nnx.*"] tables, the reference plugin\'s and',
        "# tools/planned_names.toml. Do not edit: change an entry point, then run",
        "#     uv run python tools/gen_catalog.py",
        "# (CI runs it with --check).",
        '"""Which distribution provides each add-on name, per entry-point group, and each',
        '``nnx.<sub>`` subpackage."""',
        "",
        "PROVIDERS: dict[str, dict[str, str]] = {",
    ]
    groups = sorted(g for g in providers if g != PLANNED_SUBPACKAGES)
    for group in groups:
        lines.append(f"    {json.dumps(group)}: {{")
        for name in sorted(providers[group]):
            lines.append(f"        {json.dumps(name)}: {json.dumps(providers[group][name])},")
        lines.append("    },")
    lines += ["}", "", "SUBPACKAGES: dict[str, str] = {"]
    for module, dist in sorted(providers.get(PLANNED_SUBPACKAGES, {}).items()):
        lines.append(f"    {json.dumps(module)}: {json.dumps(dist)},")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 and print the diff when the file is stale")
    parser.add_argument("--packages", type=Path, default=PACKAGES,
                        help="the directory holding the distributions (default: packages/)")
    parser.add_argument("--planned", type=Path, default=PLANNED,
                        help="the planned distributions' names (default: tools/planned_names.toml)")
    parser.add_argument("--out", type=Path, default=OUT, help="the generated module")
    args = parser.parse_args(argv)
    try:
        text = render(collect(distribution_dirs(args.packages), planned(args.planned)))
    except CatalogError as exc:
        print(f"gen_catalog: {exc}", file=sys.stderr)
        return 2
    return settle(args.out, text, check=args.check, tool="gen_catalog")


if __name__ == "__main__":
    raise SystemExit(main())
