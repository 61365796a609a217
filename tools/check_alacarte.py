"""À-la-carte install check: each distribution works installed alone on top of nnx-core.

For every distribution directory (default: every ``packages/*``, plus each
``--extra PATH``) this builds its wheel, installs it with its declared
dependencies (and the wheels of the nnx distributions it depends on, which are
not on PyPI) into a fresh venv, imports its ``nnx.<sub>`` packages, and runs
its own ``tests/`` with that venv's pytest from a temporary working directory,
so the source tree is never importable. Before the tests it lists the venv and
fails if anything is installed beyond the distribution, its declared
dependencies (transitively) and the test tools, so a test that relies on an
undeclared package fails here. One line per distribution; the exit status is
non-zero if any fails.

    uv run python tools/check_alacarte.py --extra tests-integration/example-plugin
    uv run python tools/check_alacarte.py --only nnx-core
    uv run python tools/check_alacarte.py --only nnx-peft --extras lm
    uv run python tools/check_alacarte.py --only nnx-peft --lowest-core

``--extras`` installs declared extras too (``nnx-peft[lm]``); ``--lowest-core``
installs the lowest nnx-core the add-on's declared range allows: the workspace's
nnx-core when its version is that lower bound, else the wheel given with
``--core-wheel`` (built from that release), else it fails saying so. It needs
only the standard library and uv, so CI runs it without syncing the workspace.
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

ROOT = Path(__file__).resolve().parent.parent
UV = os.environ.get("UV") or shutil.which("uv") or "uv"
TEST_TOOLS = ("pytest", "pytest-xdist", "hypothesis", "scikit-learn")  # the dev group's test tools
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
                meta["Version"], extra_requires, core_range)


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


def _release(version: str) -> tuple[int, ...]:
    """``0.1`` and ``0.1.0`` -> ``(0, 1)``: the numeric release, trailing zeros dropped."""
    m = re.match(r"\d+(\.\d+)*", version.strip())
    if not m:
        raise CheckFailed(f"cannot read the version {version!r}")
    parts = [int(p) for p in m.group(0).split(".")]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def lowest_core(dist: Dist, built: dict[str, Dist], core_wheel: Path | None) -> tuple[Dist, str]:
    """The nnx-core to install for ``dist``'s lowest-core check, and a line saying which.

    The lowest version ``dist``'s declared range allows is its ``>=`` / ``==`` / ``~=``
    bound. Only the workspace's nnx-core and a wheel passed with ``--core-wheel``
    exist here, so this installs whichever of them is exactly that version and
    fails otherwise rather than test a newer one under the lowest one's name.
    """
    bound = re.search(r"(>=|==|~=)\s*([0-9][0-9a-zA-Z.]*)", dist.core_range)
    if not bound:
        raise CheckFailed(f"{dist.name} declares no lower bound on nnx-core "
                          f"({dist.core_range or 'no nnx-core requirement'})")
    lowest = bound.group(2)
    candidates = [built["nnx-core"]]
    if core_wheel is not None:
        candidates.insert(0, _wheel_dist(core_wheel))
    for core in candidates:
        if _release(core.version) == _release(lowest):
            where = "the workspace's" if core is built["nnx-core"] else "--core-wheel's"
            return core, (f"lowest nnx-core allowed by {dist.name}'s nnx-core{dist.core_range} "
                          f"is {lowest}: installing {where} nnx-core {core.version}")
    have = ", ".join(c.version for c in candidates)
    raise CheckFailed(f"the lowest nnx-core {dist.name} allows (nnx-core{dist.core_range}) is "
                      f"{lowest}, but only nnx-core {have} is here; build {lowest} from its "
                      f"release and pass it with --core-wheel")


def _wheel_dist(wheel: Path) -> Dist:
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(f for f in zf.namelist() if f.endswith(".dist-info/METADATA"))
        meta = Parser().parsestr(zf.read(meta_name).decode())
    return Dist(wheel.parent, wheel, normalize(meta["Name"]), [], version=meta["Version"])


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


# Run in the fresh venv: every installed distribution must be reachable from the
# roots (the checked distribution with its extras, and the test tools) through
# declared requirements whose markers hold; prints the environment, one name a line.
_ENV_CHECK = """
import json, re, sys
from importlib import metadata
from packaging.requirements import Requirement
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
installed = {norm(d.metadata["Name"]): d for d in metadata.distributions()}
todo = [(norm(n), frozenset(e)) for n, e in json.loads(sys.argv[1])]
reached = set()
while todo:
    name, extras = todo.pop()
    if (name, extras) in reached or name not in installed:
        continue
    reached.add((name, extras))
    for text in installed[name].requires or []:
        req = Requirement(text)
        envs = [{"extra": e} for e in extras] or [{"extra": ""}]
        if req.marker is None or any(req.marker.evaluate(env) for env in envs):
            todo.append((norm(req.name), frozenset(req.extras)))
wanted = {name for name, _ in reached}
for name in sorted(installed):
    print(("  " if name in wanted else "  UNDECLARED ") + name + " " + installed[name].version)
extra = sorted(set(installed) - wanted)
if extra:
    sys.exit("installed but neither declared by the distribution nor a test tool: "
             + ", ".join(extra))
"""


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
          extras: tuple[str, ...] = (), core: Dist | None = None) -> str:
    """Install ``dist`` alone in a fresh venv and run its tests there; a summary line.

    ``extras``: its declared extras to install too; ``core``: the nnx-core to install
    instead of the workspace's (the lowest-core check).
    """
    if dist.name != "nnx-core" and "nnx/__init__.py" in dist.files:
        raise CheckFailed("the wheel ships nnx/__init__.py, which belongs to nnx-core")
    unknown = [e for e in extras if e not in dist.extra_requires]
    if unknown:
        raise CheckFailed(f"{dist.name} declares no extra {', '.join(unknown)} "
                          f"(declared: {', '.join(dist.extra_requires) or 'none'})")
    venv = work / "venv"
    python = venv / "bin" / "python"
    run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], work, "uv venv")
    wheels = wheels_for(dist, built, extras)
    if core is not None:
        wheels = [core.wheel if w == built["nnx-core"].wheel else w for w in wheels]
    # A wheel with extras is named by a direct reference: name[extra] @ file URL.
    targets = [f"{dist.name}[{','.join(extras)}] @ {w.resolve().as_uri()}"
               if extras and w == dist.wheel else str(w) for w in wheels]
    run(
        [UV, "pip", "install", "--python", str(python), "--constraints", str(constraints),
         *targets, *TEST_TOOLS],
        work, "uv pip install",
    )
    roots = [[dist.name, list(extras)], *([t, []] for t in TEST_TOOLS)]
    env = run([str(python), "-c", _ENV_CHECK, json.dumps(roots)], work,
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
    out = run(
        [str(venv / "bin" / "pytest"), str(tests), "-q", "-c", str(ROOT / "pyproject.toml"),
         "--rootdir", str(work), "-p", "no:cacheprovider", "--import-mode=importlib"],
        work, "pytest",
    )
    lines = [ln for ln in out.strip().splitlines() if " passed" in ln or " failed" in ln]
    return lines[-1].strip("= ") if lines else "tests ran"


def distributions(extras: list[str]) -> list[Path]:
    found = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())
    for extra in extras:
        path = Path(extra).resolve()
        if not (path / "pyproject.toml").is_file():
            sys.exit(f"check_alacarte: {extra} has no pyproject.toml")
        found.append(path)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extra", action="append", default=[], metavar="PATH",
                        help="another distribution directory to check (repeatable)")
    parser.add_argument("--only", metavar="NAME", help="check only this distribution")
    parser.add_argument("--extras", metavar="EXTRA[,EXTRA]", default="",
                        help="install these declared extras of the checked distribution(s) too")
    parser.add_argument("--lowest-core", action="store_true",
                        help="install the lowest nnx-core each add-on's declared range allows")
    parser.add_argument("--core-wheel", type=Path, metavar="PATH",
                        help="an older nnx-core wheel for --lowest-core")
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
        for i, dist in enumerate(targets):
            work = Path(tmp) / f"check-{i}"
            work.mkdir()
            start = time.monotonic()
            name = label(dist, extras) + (" on the lowest nnx-core" if args.lowest_core else "")
            try:
                core = None
                if args.lowest_core:
                    core, note = lowest_core(dist, built, args.core_wheel)
                    print(note, flush=True)
                summary = check(dist, built, work, constraints, extras, core)
            except (CheckFailed, subprocess.TimeoutExpired) as exc:
                print(f"FAIL {name} ({time.monotonic() - start:.0f}s): {exc}", flush=True)
                failures += 1
            else:
                print(f"PASS {name} ({time.monotonic() - start:.0f}s): {summary}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
