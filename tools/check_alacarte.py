"""À-la-carte install check: each distribution works installed alone on top of nnx-core.

For every distribution directory (default: every ``packages/*``, plus each
``--extra PATH``) this builds its wheel, installs it with its declared
dependencies (and the wheels of the nnx distributions it depends on, which are
not on PyPI) into a fresh venv, imports its ``nnx.<sub>`` packages, and runs
its own ``tests/`` with that venv's pytest from a temporary working directory,
so the source tree is never importable. One line per distribution; the exit
status is non-zero if any fails.

    uv run python tools/check_alacarte.py --extra tests-integration/example-plugin
    uv run python tools/check_alacarte.py --only nnx-core
"""

from __future__ import annotations

import argparse
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
TEST_TOOLS = ("pytest", "hypothesis", "scikit-learn")  # the dev group's test tools
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


@dataclass
class Dist:
    """One built distribution: its wheel and what the wheel says about itself."""

    path: Path
    wheel: Path
    name: str
    requires: list[str]
    files: list[str] = field(default_factory=list)

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
    plain = [r for r in meta.get_all("Requires-Dist") or [] if "extra ==" not in r]
    requires = [m.group(1) for r in plain if (m := _NAME.match(r))]
    return Dist(path, wheel, normalize(meta["Name"]), [normalize(r) for r in requires], files)


def wheels_for(dist: Dist, built: dict[str, Dist]) -> list[Path]:
    """The wheel of ``dist`` and of every nnx distribution it needs, transitively."""
    seen: dict[str, Dist] = {}
    todo = [dist]
    while todo:
        d = todo.pop()
        if d.name in seen:
            continue
        seen[d.name] = d
        todo.extend(built[r] for r in d.requires if r in built)
        missing = [r for r in d.requires if r.startswith("nnx-") and r not in built]
        if missing:
            raise CheckFailed(f"{d.name} needs {', '.join(missing)}, which was not built")
    return [d.wheel for d in seen.values()]


def lock_constraints(out: Path) -> Path:
    """Versions pinned by uv.lock, so a fresh venv installs what the workspace tested.

    Without them a newer torch on PyPI would be resolved (several GB) instead of
    the locked one that uv's cache already holds.
    """
    run([UV, "export", "--frozen", "--no-hashes", "--no-emit-workspace", "--all-extras",
         "--all-groups", "--format", "requirements-txt", "--output-file", str(out)],
        ROOT, "uv export")
    return out


def check(dist: Dist, built: dict[str, Dist], work: Path, constraints: Path) -> str:
    """Install ``dist`` alone in a fresh venv and run its tests there; a summary line."""
    if dist.name != "nnx-core" and "nnx/__init__.py" in dist.files:
        raise CheckFailed("the wheel ships nnx/__init__.py, which belongs to nnx-core")
    venv = work / "venv"
    python = venv / "bin" / "python"
    run([UV, "venv", "--quiet", "--python", sys.executable, str(venv)], work, "uv venv")
    run(
        [UV, "pip", "install", "--python", str(python), "--constraints", str(constraints),
         *map(str, wheels_for(dist, built)), *TEST_TOOLS],
        work, "uv pip install",
    )
    imports = ["nnx", *dist.subpackages]
    snippet = (
        "import importlib, sys\n"
        f"for name in {imports!r}:\n"
        "    importlib.import_module(name)\n"
        "import nnx\n"
        f"assert {str(ROOT)!r} not in (nnx.__file__ or ''), nnx.__file__\n"
    )
    run([str(python), "-c", snippet], work, f"import {', '.join(imports)}")
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
    args = parser.parse_args(argv)

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
        targets = [d for d in built.values() if args.only in (None, d.name)]
        if args.only and not targets:
            print(f"FAIL {args.only}: no such distribution ({', '.join(built)})")
            return 1
        for i, dist in enumerate(targets):
            work = Path(tmp) / f"check-{i}"
            work.mkdir()
            start = time.monotonic()
            try:
                summary = check(dist, built, work, constraints)
            except (CheckFailed, subprocess.TimeoutExpired) as exc:
                print(f"FAIL {dist.name} ({time.monotonic() - start:.0f}s): {exc}", flush=True)
                failures += 1
            else:
                print(f"PASS {dist.name} ({time.monotonic() - start:.0f}s): {summary}", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
