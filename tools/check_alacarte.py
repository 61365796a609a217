"""À-la-carte install check: each distribution works installed alone on top of nnx-core.

For every distribution directory (default: every ``packages/*``, plus each
``--extra PATH``) this builds its wheel, installs it with its declared
dependencies (and the wheels of the nnx distributions it depends on, which are
not on PyPI) into a fresh venv, imports its ``nnx.<sub>`` packages, and runs
its own ``tests/`` with that venv's pytest from a temporary working directory,
so the source tree is never importable. Before the tests it lists the venv and
fails if anything is installed beyond the distribution, its declared
dependencies (transitively), the test tools and its tests' own group, so a test
that relies on an undeclared package fails here. One line per distribution; the
exit status is non-zero if any fails.

    uv run python tools/check_alacarte.py --extra tests-integration/example-plugin
    uv run python tools/check_alacarte.py --only nnx-core
    uv run python tools/check_alacarte.py --only nnx-peft --extras lm
    uv run python tools/check_alacarte.py --only nnx-peft --lowest-core

``--extras`` installs declared extras too (``nnx-peft[lm]``). An extra that adds only
third-party packages (``nnx-core[onnx]``, ``nnx-decisions[jev]``) runs only the test
files that import those packages (or ``pytest.importorskip`` them), and fails if one of
them skips for want of its own package; an extra that adds an nnx distribution runs
the whole suite. ``--lowest-core`` installs the lowest nnx-core the add-on's declared
range allows among the releases in ``releases.toml`` (and the workspace's version):
the workspace's nnx-core when it is that version, else that release's nnx-core built
from its recorded commit (``git archive`` of it, then ``uv build``; the clone needs
that commit, so CI checks out the full history).

The test tools are pytest and pytest-xdist (the runner the root pytest configuration
asks for); what a distribution's tests need beyond them (hypothesis, scikit-learn as a
reference) is its own ``[dependency-groups] test``, installed in its cell only. The
checker needs only the standard library (tomllib: 3.11+) and uv, so CI runs it
without syncing the workspace; ``--python`` picks the cell's interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from email.parser import Parser
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (a workspace venv's tests load this): pytest's own TOML reader
    import tomli as tomllib

if __package__ in (None, ""):  # run as a script: make tools._* importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools._cell_env import ENV_CHECK
from tools._extra_cells import (
    IMPORT_NAMES,
    skipped_for_want_of,
    tests_needing,
    third_party_added,
)
from tools._releases import (
    RELEASES,
    ReleasesError,
    lower_bound,
    lowest_release,
    read_releases,
    release_key,
)

ROOT = Path(__file__).resolve().parent.parent
UV = os.environ.get("UV") or shutil.which("uv") or "uv"
#: Installed in every cell: the runner the root pytest configuration asks for (-n auto).
#: Anything else a distribution's tests use is its own ``test`` dependency group.
TEST_TOOLS = ("pytest", "pytest-xdist")
TEST_GROUP = "test"
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


@dataclass
class Dist:
    """One built distribution: its wheel and what the wheel says about itself."""

    path: Path
    wheel: Path
    name: str
    requires: list[str]
    files: list[str] = field(default_factory=list)
    version: str = ""
    #: Each declared extra -> the names of the requirements it adds.
    extra_requires: dict[str, list[str]] = field(default_factory=dict)
    #: The declared ``nnx-core`` requirement's specifier (``>=0.1,<0.2``), if any.
    core_range: str = ""
    #: The names its ``[dependency-groups] test`` requires (its tests' own tools).
    test_group: list[str] = field(default_factory=list)

    @property
    def subpackages(self) -> list[str]:
        """``nnx.<sub>`` for every ``nnx/<sub>/__init__.py`` the wheel ships."""
        subs = {f.split("/")[1] for f in self.files if re.fullmatch(r"nnx/[^/]+/__init__\.py", f)}
        return [f"nnx.{s}" for s in sorted(subs)]


class CheckFailed(Exception):
    """A step failed; the message says which, with the tail of its output."""


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def run(cmd: list[str], cwd: Path, what: str, timeout: float = 1800) -> str:
    proc = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_clean_env()
    )
    out = proc.stdout + proc.stderr
    if proc.returncode != 0:
        tail = "\n".join("    " + line for line in out.strip().splitlines()[-40:])
        raise CheckFailed(f"{what} failed (exit {proc.returncode}):\n{tail}")
    return out


def _clean_env() -> dict[str, str]:
    # Do not leak the workspace venv (uv run sets these) into the fresh one.
    env = dict(os.environ)
    for key in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "UV_PROJECT_ENVIRONMENT"):
        env.pop(key, None)
    return env


def build(path: Path, out_dir: Path) -> Dist:
    out_dir.mkdir(parents=True)
    run([UV, "build", "--wheel", str(path), "--out-dir", str(out_dir)], out_dir, "uv build")
    (wheel,) = out_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as zf:
        files = zf.namelist()
        meta_name = next(f for f in files if f.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(meta_name).decode())
    # Declared dependencies, without the optional extras (those install on request only).
    declared = meta.get_all("Requires-Dist") or []
    plain = [r for r in declared if "extra ==" not in r]
    requires = [m.group(1) for r in plain if (m := _NAME.match(r))]
    extra_requires: dict[str, list[str]] = {}
    for req in declared:
        extra, name = _EXTRA.search(req), _NAME.match(req)
        if extra and name:
            extra_requires.setdefault(extra.group(1), []).append(normalize(name.group(1)))
    core_range = next((r.split(";")[0][len(m.group(0)):].strip(" ()") for r in plain
                       if (m := _NAME.match(r)) and normalize(m.group(1)) == "nnx-core"), "")
    return Dist(path, wheel, normalize(meta["Name"]), [normalize(r) for r in requires], files,
                meta["Version"], extra_requires, core_range, test_group(path))


def test_group(path: Path) -> list[str]:
    """The requirement names of ``path``'s ``test`` dependency group (none declared: [])."""
    groups = tomllib.loads((path / "pyproject.toml").read_text()).get("dependency-groups", {})
    reqs = groups.get(TEST_GROUP, [])
    if not all(isinstance(r, str) for r in reqs):
        raise CheckFailed(f"{path.name}'s {TEST_GROUP} group must list plain requirements")
    return [normalize(m.group(1)) for r in reqs if (m := _NAME.match(r))]


def wheels_for(dist: Dist, built: dict[str, Dist], extras: tuple[str, ...] = ()) -> list[Path]:
    """The wheel of ``dist`` and of every nnx distribution it needs, transitively
    (with ``extras``, also those its extras add)."""
    seen: dict[str, Dist] = {}
    todo = [dist]
    while todo:
        d = todo.pop()
        if d.name in seen:
            continue
        seen[d.name] = d
        needs = [*d.requires, *(r for e in extras if d is dist for r in d.extra_requires[e])]
        todo.extend(built[r] for r in needs if r in built)
        missing = [r for r in needs if r.startswith("nnx-") and r not in built]
        if missing:
            raise CheckFailed(f"{d.name} needs {', '.join(missing)}, which was not built")
    return [d.wheel for d in seen.values()]


def lowest_core(dist: Dist, built: dict[str, Dist],
                releases: dict[str, dict[str, str]]) -> tuple[str, str | None, str]:
    """Which nnx-core ``dist``'s lowest-core check installs: ``(version, commit, note)``.

    The version is the lowest of the recorded nnx-core releases and the workspace's
    nnx-core that ``dist``'s range allows; ``commit`` is None when that is the
    workspace's version (its freshly built wheel is installed), else the commit the
    release was built from. Never a newer core under the lowest one's name.
    """
    workspace = built["nnx-core"].version
    recorded = releases.get("nnx-core", {})
    try:
        floor = lower_bound(dist.core_range)
        version = lowest_release(dist.core_range, [*recorded, workspace])
    except ReleasesError as exc:
        raise CheckFailed(f"{dist.name}'s nnx-core{dist.core_range or ' (none declared)'}: "
                          f"{exc}") from exc
    head = f"lowest nnx-core allowed by {dist.name}'s nnx-core{dist.core_range} is {floor}"
    if release_key(version) == release_key(workspace):
        return workspace, None, f"{head}: installing the workspace's nnx-core {workspace}"
    commit = recorded[version]
    return version, commit, (f"{head}: building nnx-core {version} from {commit[:12]} "
                             f"({RELEASES.name}); the workspace's is {workspace}")


def build_at_commit(core: Dist, version: str, commit: str, out: Path) -> Dist:
    """Build ``core``'s distribution as it was at ``commit`` (which releases.toml records
    as ``version``): ``git archive`` of its folder there, then ``uv build --wheel``."""
    rel = core.path.resolve().relative_to(ROOT).as_posix()
    src = out / "src"
    src.mkdir(parents=True)
    if subprocess.run(["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT,
                      capture_output=True).returncode != 0:
        raise CheckFailed(f"commit {commit} ({core.name} {version} in {RELEASES.name}) is "
                          f"not in this clone; fetch the full history (git fetch --unshallow)")
    archive = out / "core.tar"
    run(["git", "archive", "--format=tar", "--output", str(archive), commit, rel], ROOT,
        f"git archive {commit[:12]} {rel}")
    run(["tar", "-xf", str(archive), "-C", str(src)], out, "tar -x")
    old = build(src / rel, out / "wheel")
    if release_key(old.version) != release_key(version) or old.name != core.name:
        raise CheckFailed(f"{RELEASES.name} records {core.name} {version} at {commit[:12]}, "
                          f"but that commit builds {old.name} {old.version}")
    return old


def lock_constraints(out: Path) -> Path:
    """Versions pinned by uv.lock, so a fresh venv installs what the workspace tested.

    Without them a newer torch on PyPI would be resolved (several GB) instead of
    the locked one that uv's cache already holds.
    """
    run([UV, "export", "--frozen", "--no-hashes", "--no-emit-workspace", "--all-extras",
         "--all-groups", "--format", "requirements-txt", "--output-file", str(out)],
        ROOT, "uv export")
    return out


def label(dist: Dist, extras: tuple[str, ...]) -> str:
    """``nnx-peft`` or, with extras, ``nnx-peft[lm]``."""
    return f"{dist.name}[{','.join(extras)}]" if extras else dist.name



ADD_ON_RUNS = ROOT / "packages" / "nnx-core" / "tests" / "data" / "add_on_runs"


def runs_without_add_ons(venv: Path, work: Path) -> str:
    """In the nnx-core-only venv, ``nnx runs list`` and ``nnx runs show`` read a runs
    folder holding a real nnx-lm run beside a core run (the fixture its regenerate.py
    writes): both listed, the LM run's net named with the distribution that reads it."""
    root = work / "add-on-runs"
    shutil.copytree(ADD_ON_RUNS, root, ignore=shutil.ignore_patterns("*.py"))
    ids = sorted(p.name for p in root.iterdir() if (p / "run.yaml").is_file())
    lm = [i for i in ids if "net: TRANSFORMER" in (root / i / "run.yaml").read_text()]
    nnx = str(venv / "bin" / "nnx")
    listed = run([nnx, "runs", "list", "--root", str(root)], work, "nnx runs list")
    missing = [i for i in ids if i not in listed]
    if len(lm) != 1 or missing or "TRANSFORMER (needs nnx-lm)" not in listed:
        raise CheckFailed(f"nnx runs list without nnx-lm (LM run {lm}, missing rows "
                          f"{missing}):\n{listed}")
    for run_id in ids:
        shown = run([nnx, "runs", "show", run_id, "--root", str(root)], work, "nnx runs show")
        if run_id in lm and "net: TRANSFORMER (needs nnx-lm: pip install nnx-lm)" not in shown:
            raise CheckFailed(f"nnx runs show {run_id} without nnx-lm:\n{shown}")
    return f"nnx-core alone: nnx runs list / show read an nnx-lm run and a core run ({len(ids)})"


def check(dist: Dist, built: dict[str, Dist], work: Path, constraints: Path,
          extras: tuple[str, ...] = (), core: Dist | None = None,
          python_version: str = sys.executable) -> str:
    """Install ``dist`` alone in a fresh venv and run its tests there; a summary line.

    ``extras``: its declared extras to install too; ``core``: the nnx-core to install
    instead of the workspace's (the lowest-core check); ``python_version``: the venv's
    interpreter (a version or a path).
    """
    if dist.name != "nnx-core" and "nnx/__init__.py" in dist.files:
        raise CheckFailed("the wheel ships nnx/__init__.py, which belongs to nnx-core")
    unknown = [e for e in extras if e not in dist.extra_requires]
    if unknown:
        raise CheckFailed(f"{dist.name} declares no extra {', '.join(unknown)} "
                          f"(declared: {', '.join(dist.extra_requires) or 'none'})")
    venv = work / "venv"
    python = venv / "bin" / "python"
    run([UV, "venv", "--quiet", "--python", python_version, str(venv)], work, "uv venv")
    wheels = wheels_for(dist, built, extras)
    if core is not None:
        wheels = [core.wheel if w == built["nnx-core"].wheel else w for w in wheels]
    # A wheel with extras is named by a direct reference: name[extra] @ file URL.
    targets = [f"{dist.name}[{','.join(extras)}] @ {w.resolve().as_uri()}"
               if extras and w == dist.wheel else str(w) for w in wheels]
    group = ["--group", f"{dist.path / 'pyproject.toml'}:{TEST_GROUP}"] if dist.test_group else []
    run(
        [UV, "pip", "install", "--python", str(python), "--constraints", str(constraints),
         *targets, *TEST_TOOLS, *group],
        work, "uv pip install",
    )
    roots = [[dist.name, list(extras)], *([t, []] for t in (*TEST_TOOLS, *dist.test_group))]
    env = run([str(python), "-c", ENV_CHECK, json.dumps(roots)], work,
              "the environment check (only declared dependencies and the test tools)")
    print(f"{label(dist, extras)} environment:\n{env.rstrip()}", flush=True)
    imports = ["nnx", *dist.subpackages]
    snippet = (
        "import importlib, sys\n"
        f"for name in {imports!r}:\n"
        "    importlib.import_module(name)\n"
        "import nnx\n"
        f"assert {str(ROOT)!r} not in (nnx.__file__ or ''), nnx.__file__\n"
    )
    run([str(python), "-c", snippet], work, f"import {', '.join(imports)}")
    if dist.name == "nnx-core" and not extras:
        print(runs_without_add_ons(venv, work), flush=True)
    tests = dist.path / "tests"
    if not tests.is_dir():
        raise CheckFailed(f"no tests/ directory in {dist.path}")
    modules = _import_names(python, work,
                            third_party_added(dist.requires, dist.extra_requires, extras))
    paths = tests_needing(tests, modules) if modules else [tests]
    if not paths:
        raise CheckFailed(f"no test of {dist.name} imports {', '.join(modules)}: "
                          f"nothing tests {label(dist, extras)}")
    out = run(
        [str(venv / "bin" / "pytest"), *map(str, paths), "-q", "-rs", "-c",
         str(ROOT / "pyproject.toml"), "--rootdir", str(work), "-p", "no:cacheprovider",
         "--import-mode=importlib"],
        work, "pytest",
    )
    if modules:
        missing = skipped_for_want_of(out, modules)
        if missing:
            raise CheckFailed(f"{label(dist, extras)} installed, yet tests skipped for want "
                              f"of it:\n    " + "\n    ".join(missing))
    lines = [ln for ln in out.strip().splitlines() if " passed" in ln or " failed" in ln]
    summary = lines[-1].strip("= ") if lines else "tests ran"
    if not modules:
        return summary
    return f"{summary} ({len(paths)} test file(s) importing {', '.join(modules)})"


def _import_names(python: Path, work: Path, dists: list[str]) -> list[str]:
    if not dists:
        return []
    out = run([str(python), "-c", IMPORT_NAMES, json.dumps(dists)], work, "import names")
    names: list[str] = json.loads(out.strip().splitlines()[-1])
    if not names:
        raise CheckFailed(f"{', '.join(dists)} installed no importable module")
    return names


def distributions(extras: list[str]) -> list[Path]:
    found = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
    for extra in extras:
        path = Path(extra).resolve()
        if not (path / "pyproject.toml").is_file():
            sys.exit(f"check_alacarte: {extra} has no pyproject.toml")
        found.append(path)
    return found


def _releases_or_exit() -> dict[str, dict[str, str]]:
    try:
        return read_releases()
    except ReleasesError as exc:
        sys.exit(f"check_alacarte: {exc}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extra", action="append", default=[], metavar="PATH",
                        help="another distribution directory to check (repeatable)")
    parser.add_argument("--only", metavar="NAME", help="check only this distribution")
    parser.add_argument("--extras", metavar="EXTRA[,EXTRA]", default="",
                        help="install these declared extras of the checked distribution(s) too")
    parser.add_argument("--lowest-core", action="store_true",
                        help="install the lowest nnx-core each add-on's declared range allows")
    parser.add_argument("--python", default=sys.executable, metavar="VERSION",
                        help="the cells' interpreter (default: the one running this)")
    args = parser.parse_args(argv)
    extras = tuple(e for e in args.extras.split(",") if e)

    failures = 0
    with tempfile.TemporaryDirectory(prefix="nnx-alacarte-") as tmp:
        constraints = lock_constraints(Path(tmp) / "constraints.txt")
        built: dict[str, Dist] = {}
        for i, path in enumerate(distributions(args.extra)):
            try:
                dist = build(path, Path(tmp) / f"wheel-{i}")
            except CheckFailed as exc:
                print(f"FAIL {path.name}: {exc}", flush=True)
                failures += 1
                continue
            built[dist.name] = dist
        targets = [d for d in built.values() if args.only in (None, d.name)
                   and not (args.lowest_core and d.name == "nnx-core")
                   and all(e in d.extra_requires for e in extras)]
        if args.only and not targets:
            print(f"FAIL {args.only}: no such distribution ({', '.join(built)}), or it "
                  f"declares no extra {args.extras or '-'}, or it is nnx-core under "
                  f"--lowest-core")
            return 1
        releases = _releases_or_exit() if args.lowest_core else {}
        cores: dict[str, Dist] = {}  # an older nnx-core built once per commit
        for i, dist in enumerate(targets):
            work = Path(tmp) / f"check-{i}"
            work.mkdir()
            start = time.monotonic()
            name = label(dist, extras) + (" on the lowest nnx-core" if args.lowest_core else "")
            try:
                core = None
                if args.lowest_core:
                    version, commit, note = lowest_core(dist, built, releases)
                    print(note, flush=True)
                    if commit is not None and commit not in cores:
                        cores[commit] = build_at_commit(built["nnx-core"], version, commit,
                                                        Path(tmp) / f"core-{commit[:12]}")
                    core = cores.get(commit or "")
                summary = check(dist, built, work, constraints, extras, core, args.python)
            except (CheckFailed, subprocess.TimeoutExpired) as exc:
                print(f"FAIL {name} ({time.monotonic() - start:.0f}s): {exc}", flush=True)
                failures += 1
            else:
                print(f"PASS {name} ({time.monotonic() - start:.0f}s): {summary}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
