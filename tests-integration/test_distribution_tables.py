"""One list per name (issue 37): the distribution tables in README.md and
docs/architecture.md say what ``packages/*`` and tools/planned_names.toml say.

The folders are the list of distributions: every built one has a row whose status is
its pyproject's version, and the planned rows are exactly the planned distributions
that have no folder yet. The architecture table also names each distribution's
``nnx.<sub>`` packages, checked against its ``src/nnx/<sub>/`` (or, planned, its
planned subpackages).

A distribution with a folder that tools/planned_names.toml still lists is in progress
(nnx-graph was, during issue 39): its row stays planned and names its
planned subpackages, which must include every one it already ships.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
PLANNED = "planned"
CORE = "nnx-core"


def _table(markdown: str, header: str) -> dict[str, dict[str, str]]:
    """The rows of the table whose header line starts with ``header``: distribution ->
    column -> cell (backticks kept; the distribution's own are stripped)."""
    lines = markdown.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(header))
    columns = [c.strip() for c in lines[at].strip("|").split("|")]
    rows: dict[str, dict[str, str]] = {}
    for line in lines[at + 2:]:
        if not line.startswith("|"):
            break
        cells = dict(zip(columns, (c.strip() for c in line.strip().strip("|").split("|")),
                         strict=True))
        name = cells[columns[0]].strip("`")
        assert name not in rows, f"two rows for {name}"
        rows[name] = cells
    return rows


def _built() -> dict[str, tuple[str, list[str]]]:
    """Distribution -> (version, its ``nnx.<sub>`` packages) for every ``packages/*``."""
    built = {}
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = tomllib.loads(pyproject.read_text())["project"]
        subs = sorted(f"nnx.{p.parent.name}"
                      for p in (pyproject.parent / "src" / "nnx").glob("*/__init__.py"))
        built[project["name"]] = (project["version"], subs)
    return built


def _planned_table() -> dict[str, dict[str, list[str]]]:
    return tomllib.loads((ROOT / "tools" / "planned_names.toml").read_text())


def _planned(built: dict[str, tuple[str, list[str]]], table: dict[str, dict[str, list[str]]],
             *, in_progress: bool = False) -> dict[str, list[str]]:
    """Planned distribution -> its planned subpackages: those without a folder, or with
    ``in_progress`` those with one (started, still listed in planned_names.toml)."""
    return {dist: sorted(groups.get("subpackages", [])) for dist, groups in table.items()
            if (dist in built) == in_progress}


def _problems(rows: dict[str, dict[str, str]], status: str, packages: str | None = None,
              planned_table: dict[str, dict[str, list[str]]] | None = None) -> list[str]:
    """What the table says that the folders do not (an empty list when it is true);
    ``planned_table`` stands in for tools/planned_names.toml."""
    built = _built()
    table = _planned_table() if planned_table is None else planned_table
    planned = _planned(built, table)
    problems = [f"{d}: no row" for d in [*built, *planned] if d not in rows]
    problems += [f"{d}: a row for a distribution neither built nor planned"
                 for d in rows if d not in built and d not in planned]
    started = _planned(built, table, in_progress=True)
    for dist, (version, subs) in built.items():
        if dist in started:
            if dist in rows and rows[dist][status] != PLANNED:
                problems.append(f"{dist}: status {rows[dist][status]!r}, it is in progress "
                                f"({PLANNED})")
            if not set(subs) <= set(started[dist]):
                problems.append(f"{dist}: src/nnx/ has {subs}, beyond its planned "
                                f"{started[dist]}")
            subs = started[dist]
        elif dist in rows and rows[dist][status] != version:
            problems.append(f"{dist}: status {rows[dist][status]!r}, pyproject says {version}")
        if packages and dist in rows and dist != CORE:  # core's row names its layers
            listed = sorted(re.findall(r"`(nnx\.[a-z_]+)`", rows[dist][packages]))
            if listed != subs:
                problems.append(f"{dist}: packages {listed}, src/nnx/ has {subs}")
    for dist, subs in planned.items():
        if dist in rows and rows[dist][status] != PLANNED:
            problems.append(f"{dist}: status {rows[dist][status]!r}, it is {PLANNED}")
        if packages and dist in rows:
            listed = sorted(re.findall(r"`(nnx\.[a-z_]+)`", rows[dist][packages]))
            if listed != subs:
                problems.append(f"{dist}: packages {listed}, planned_names.toml has {subs}")
    return problems


def _readme_rows(text: str) -> dict[str, dict[str, str]]:
    return _table(text, "| distribution | provides | status |")


def _architecture_rows(text: str) -> dict[str, dict[str, str]]:
    return _table(text, "| distribution | status | packages |")


def test_the_readme_table_is_the_built_and_planned_distributions():
    rows = _readme_rows((ROOT / "README.md").read_text())
    assert _problems(rows, "status") == []


def test_the_architecture_table_is_the_built_and_planned_distributions_and_packages():
    rows = _architecture_rows((ROOT / "docs" / "architecture.md").read_text())
    assert _problems(rows, "status", "packages") == []


def test_a_stale_row_is_named():
    text = (ROOT / "docs" / "architecture.md").read_text()
    # A distribution dropped, a version left behind, a planned one marked built.
    stale = re.sub(r"\n\| nnx-search \|[^\n]*", "", text)
    stale = stale.replace("| nnx-lm | 0.1.0 |", "| nnx-lm | 0.0.9 |")
    stale = stale.replace("`nnx.generation`, ", "")
    # nnx-graph started but not complete (listed in planned_names.toml) yet marked built.
    # nnx-future: planned, with no folder (issue 41 built the last real ones), yet
    # marked built.
    stale = stale.replace("\n| nnx-viz |",
                          "\n| nnx-future | 0.1.0 | `nnx.future` | — |\n| nnx-viz |")
    in_progress = {**_planned_table(), "nnx-graph": {"subpackages": [
        "nnx.graph", "nnx.graph_tasks", "nnx.link_tasks"]},
        "nnx-future": {"subpackages": ["nnx.future"]}}
    assert _problems(_architecture_rows(stale), "status", "packages", in_progress) == [
        "nnx-search: no row",
        "nnx-graph: status '0.1.0', it is in progress (planned)",
        "nnx-lm: status '0.0.9', pyproject says 0.1.0",
        "nnx-lm: packages ['nnx.lm', 'nnx.lm_tasks'], src/nnx/ has "
        "['nnx.generation', 'nnx.lm', 'nnx.lm_tasks']",
        "nnx-future: status '0.1.0', it is planned",
    ]
