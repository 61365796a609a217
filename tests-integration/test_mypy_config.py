"""The root mypy configuration discovers every distribution's sources (issue 14)."""

from __future__ import annotations

import glob
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def _mypy() -> dict[str, list[str]]:
    config: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())[
        "tool"]["mypy"]
    return config


def test_mypy_files_glob_every_distribution_src() -> None:
    files = _mypy()["files"]
    assert "packages/*/src" in files
    matched = {Path(p).resolve() for pattern in files for p in glob.glob(str(ROOT / pattern))}
    for src in ROOT.glob("packages/*/src"):
        assert src.resolve() in matched, src
    assert (ROOT / "tests-integration" / "example-plugin" / "src").resolve() in matched


def test_every_checked_src_is_an_explicit_package_base() -> None:
    # Without the base, an add-on's nnx/<sub>/x.py (no nnx/__init__.py) maps to <sub>.x.
    bases = {(ROOT / p).resolve() for p in _mypy()["mypy_path"]}
    srcs = [*ROOT.glob("packages/*/src"), ROOT / "tests-integration" / "example-plugin" / "src"]
    assert [str(s) for s in srcs if s.resolve() not in bases] == []
