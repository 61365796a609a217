"""One list per name (issue 25): the lists derived from packages/* are current, and
a name or a distribution added in its own folder reaches them with no other edit.

tools/gen_catalog.py writes nnx-core's install-hint catalog from every add-on's
entry points; tools/gen_workspace.py derives the root pyproject's and the CI
matrix's lists of distributions; tools/gen_exports.py writes ``nnx/__init__.py``'s
type-checking imports from its ``_CORE_EXPORTS`` table (issue 37). They run here on
temporary copies.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "packages/nnx-core/src/nnx/_foundation/_catalog_generated.py"
NNX_INIT = ROOT / "packages/nnx-core/src/nnx/__init__.py"


def _tool(name: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "tools" / name), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def _copy_pyprojects(dest: Path) -> Path:
    """``dest/packages/<dist>/pyproject.toml`` for every distribution: all the tools read."""
    for src in ROOT.glob("packages/*/pyproject.toml"):
        (dest / "packages" / src.parent.name).mkdir(parents=True)
        shutil.copy(src, dest / "packages" / src.parent.name / "pyproject.toml")
    return dest / "packages"


def test_the_generated_catalog_and_workspace_lists_are_current():
    for tool in ("gen_catalog.py", "gen_workspace.py", "gen_exports.py"):
        done = _tool(tool, "--check")
        assert done.returncode == 0, done.stdout + done.stderr


def test_an_entry_point_added_to_an_add_on_gives_its_install_hint_with_no_core_edit(tmp_path):
    packages = _copy_pyprojects(tmp_path)
    peft = packages / "nnx-peft" / "pyproject.toml"
    text = peft.read_text()
    assert "FancyThing" not in text
    peft.write_text(text.replace('[project.entry-points."nnx.exports"]\n',
                                 '[project.entry-points."nnx.exports"]\n'
                                 'FancyThing = "nnx.peft.fancy:FancyThing"\n'))
    core_before = GENERATED.read_bytes()
    out = tmp_path / "_catalog_generated.py"

    # The real catalog is now stale against the copy, and --check says where.
    stale = _tool("gen_catalog.py", "--check", "--packages", packages)
    assert stale.returncode == 1
    assert '+        "FancyThing": "nnx-peft",' in stale.stdout

    done = _tool("gen_catalog.py", "--packages", packages, "--out", out)
    assert done.returncode == 0, done.stderr
    assert GENERATED.read_bytes() == core_before  # nothing under nnx-core was edited
    # Core reads the regenerated table in place of its own; the workspace's nnx-peft
    # does not declare FancyThing, which is the add-on version that has it not installed.
    probe = textwrap.dedent(f"""
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location(
            "nnx._foundation._catalog_generated", {str(out)!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        sys.modules[spec.name] = module
        import nnx
        try:
            from nnx import FancyThing
        except nnx.MissingDistributionError as exc:
            print(type(exc).__name__, exc.distribution, exc)
    """)
    ran = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         timeout=120, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.startswith("MissingDistributionError nnx-peft nnx.FancyThing is "
                                 "provided by the nnx-peft distribution"), ran.stdout
    assert "install it with: pip install nnx-peft" in ran.stdout


def test_a_core_export_added_to_the_table_reaches_the_type_checking_block(tmp_path):
    init = tmp_path / "__init__.py"
    init.write_text(NNX_INIT.read_text().replace(
        '    "NNParams": "nnx.params.net",\n',
        '    "NNParams": "nnx.params.net",\n    "FancyParams": "nnx.params.fancy",\n'))
    stale = _tool("gen_exports.py", "--check", "--init", init)
    assert stale.returncode == 1
    assert "+    from nnx.params.fancy import FancyParams as FancyParams\n" in stale.stdout
    assert _tool("gen_exports.py", "--init", init).returncode == 0
    assert _tool("gen_exports.py", "--check", "--init", init).returncode == 0
    text = init.read_text()
    # The table is the one list: the block follows it, and the lines above are untouched.
    assert text.count("FancyParams") == 3  # the table's row and the `X as X` import
    head = NNX_INIT.read_text().split("\nif TYPE_CHECKING:\n")[0]
    assert text.split("\nif TYPE_CHECKING:\n")[0] == head.replace(
        '    "NNParams": "nnx.params.net",\n',
        '    "NNParams": "nnx.params.net",\n    "FancyParams": "nnx.params.fancy",\n')


def test_a_table_that_is_not_a_literal_is_refused_and_nothing_is_written(tmp_path):
    init = tmp_path / "__init__.py"
    original = NNX_INIT.read_text().replace("_CORE_EXPORTS: dict[str, str] = {",
                                            "_CORE_EXPORTS: dict[str, str] = _build() or {")
    init.write_text(original)
    done = _tool("gen_exports.py", "--init", init)
    assert done.returncode == 2 and "_CORE_EXPORTS is not a literal dict" in done.stderr
    assert init.read_text() == original


def test_the_lazy_table_names_where_each_re_export_points_for_type_checkers():
    # Issue 37: the table and the TYPE_CHECKING block once named 12 names from different
    # modules (a face for one, the defining module for the other).
    import ast

    tree = ast.parse(NNX_INIT.read_text())
    checked = {alias.asname: node.module
               for block in tree.body if isinstance(block, ast.If)
               for node in block.body if isinstance(node, ast.ImportFrom)
               for alias in node.names}
    table = next(ast.literal_eval(node.value) for node in tree.body
                 if isinstance(node, ast.AnnAssign) and node.value is not None
                 and getattr(node.target, "id", "") == "_CORE_EXPORTS")
    assert checked == table


def test_two_distributions_claiming_one_name_are_refused(tmp_path):
    packages = _copy_pyprojects(tmp_path)
    lm = packages / "nnx-lm" / "pyproject.toml"
    lm.write_text(lm.read_text().replace('[project.entry-points."nnx.exports"]\n',
                                         '[project.entry-points."nnx.exports"]\n'
                                         'LoRALinear = "nnx.lm.x:LoRALinear"\n'))
    done = _tool("gen_catalog.py", "--check", "--packages", packages,
                 "--out", tmp_path / "never.py")
    assert done.returncode == 2
    assert "'LoRALinear' is declared by both nnx-lm and nnx-peft" in done.stderr
    assert not (tmp_path / "never.py").exists()


def test_a_new_distribution_reaches_the_root_and_ci_lists_by_regenerating(tmp_path):
    _copy_pyprojects(tmp_path)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / ".github/workflows").mkdir(parents=True)
    shutil.copy(ROOT / ".github/workflows/ci.yml", tmp_path / ".github/workflows/ci.yml")
    new = tmp_path / "packages" / "nnx-acme"
    new.mkdir()
    (new / "pyproject.toml").write_text(textwrap.dedent("""
        [project]
        name = "nnx-acme"
        version = "0.1.0"
        dependencies = ["nnx-core>=0.1,<0.2", "torch>=2.4"]
        [project.optional-dependencies]
        lm = ["nnx-lm>=0.1,<0.2"]
        plots = ["plotly>=5"]
    """))
    stale = _tool("gen_workspace.py", "--check", "--root", tmp_path)
    assert stale.returncode == 1 and "nnx-acme" in stale.stdout
    assert _tool("gen_workspace.py", "--root", tmp_path).returncode == 0
    assert _tool("gen_workspace.py", "--check", "--root", tmp_path).returncode == 0

    root = tomllib.loads((tmp_path / "pyproject.toml").read_text())
    assert "nnx-acme" in root["project"]["dependencies"]
    # The workspace's own nnx-core entry keeps its extras through the regeneration.
    core = next(d for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "dependencies"] if d.startswith("nnx-core["))
    assert core in root["project"]["dependencies"]
    assert root["tool"]["uv"]["sources"]["nnx-acme"] == {"workspace": True}
    assert "packages/nnx-acme/src" in root["tool"]["mypy"]["mypy_path"]
    ci = (tmp_path / ".github/workflows/ci.yml").read_text()
    # Every workspace distribution, read from the folders, so a new one needs no edit here.
    dists = sorted([p.name for p in (ROOT / "packages").iterdir()
                    if (p / "pyproject.toml").is_file()] + ["nnx-acme"])
    assert f"dist: [{', '.join(dists)}]" in ci
    assert '{dist: nnx-acme, python: "3.12", cell: "extra lm", args: "--extras lm"}' in ci
    assert '{dist: nnx-acme, python: "3.12", cell: "lowest nnx-core"' in ci
    # A third-party extra gets its cell too (issue 37): it runs the tests importing plotly.
    assert '{dist: nnx-acme, python: "3.12", cell: "extra plots", args: "--extras plots"}' in ci
    # Everything outside the generated lists is untouched.
    untouched = (ROOT / ".github/workflows/ci.yml").read_text().split("# END generated")[1]
    assert ci.split("# END generated")[1] == untouched


def test_a_started_distribution_keeps_its_planned_names_until_its_rows_are_deleted(tmp_path):
    # Issue 39: nnx-graph is built but not complete; `import nnx.graph_tasks` (planned,
    # not shipped yet) still names it, and its built names join the planned ones.
    packages = _copy_pyprojects(tmp_path)
    (packages / "nnx-graph" / "src" / "nnx" / "graph").mkdir(parents=True)
    (packages / "nnx-graph" / "src" / "nnx" / "graph" / "__init__.py").write_text("")
    planned = tmp_path / "planned.toml"
    planned.write_text('[nnx-graph]\nsubpackages = ["nnx.graph_tasks"]\n'
                       '"nnx.exports" = ["PlannedOnly"]\n')
    out = tmp_path / "catalog.py"
    done = _tool("gen_catalog.py", "--packages", packages, "--planned", planned, "--out", out)
    assert done.returncode == 0, done.stderr
    text = out.read_text()
    for line in ('"nnx.graph_tasks": "nnx-graph"', '"nnx.graph": "nnx-graph"',
                 '"PlannedOnly": "nnx-graph"', '"GraphSageNN": "nnx-graph"'):
        assert line in text, line
    planned.write_text("")  # the rows deleted: complete, only what it ships
    done = _tool("gen_catalog.py", "--packages", packages, "--planned", planned, "--out", out)
    assert done.returncode == 0, done.stderr
    assert '"nnx.graph_tasks"' not in out.read_text() and "PlannedOnly" not in out.read_text()
