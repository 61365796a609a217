"""The pytest plugin nnx-core ships for every nnx distribution's tests (docs/extending.md).

Loaded with ``-p nnx.testing`` (the workspace's pytest ``addopts``; the face re-exports
these hooks). Not a ``pytest11`` entry point: pytest would then assertion-rewrite the
whole ``nnx`` package in every environment holding nnx-core. It acts only on the test
directory of an nnx distribution, a ``tests/`` directory beside a ``pyproject.toml``
whose project is named ``nnx-*``; for each one it collects from:

* the directory is an import root, so the distribution's shared helpers
  (``_nnx_core_tiny.py``, ``_peft_tiny.py``, ...) import by name: no conftest edits
  ``sys.path`` (the workspace runs pytest with ``--import-mode=importlib``, which adds
  no test directory itself);
* torch runs one intra-op thread: the tiny models are fastest that way, and a suite
  never oversubscribes CI's two cores.

The tiny data, models and loaders themselves are :mod:`nnx.testing`'s; the
conformance call every suite makes is :func:`nnx.testing.check_distribution`.
A project that is not an nnx distribution sees nothing.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

__all__ = ["distribution_tests_dir", "pytest_ignore_collect", "pytest_load_initial_conftests"]

# The project name line of a pyproject.toml (tomllib is Python 3.11+; nnx-core runs on 3.10).
_NAME = re.compile(r'^name\s*=\s*["\'](nnx-[A-Za-z0-9._-]+)["\']', re.MULTILINE)


@cache
def _is_nnx_project(project: Path) -> bool:
    try:
        text = (project / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return False
    return _NAME.search(text.partition("[project]")[2].split("\n[", 1)[0]) is not None


def distribution_tests_dir(path: Path) -> Path | None:
    """The nnx distribution's ``tests/`` directory ``path`` is or lies in, if any."""
    for parent in (path, *path.parents):
        if parent.name == "tests" and _is_nnx_project(parent.parent):
            return parent
    return None


@cache
def _adopt(tests: Path) -> None:
    """Once per distribution test directory: its import root and the thread count."""
    # torch is imported here, not at plugin load: pytest loads the plugin in every run
    # of an environment holding nnx-core, most of which never reach an nnx test.
    import torch

    torch.set_num_threads(1)
    if str(tests) not in sys.path:
        sys.path.insert(0, str(tests))


def _consider(path: Path) -> None:
    tests = distribution_tests_dir(path.resolve())
    if tests is not None:
        _adopt(tests)


def pytest_load_initial_conftests(early_config: Any, parser: Any, args: Sequence[str]) -> None:
    """The paths given on the command line, and the ``test*`` directories pytest loads
    their conftests from, before those conftests are imported."""
    for arg in args:
        path = Path(str(arg).split("::")[0])
        if str(arg).startswith("-") or not path.exists():
            continue
        _consider(path)
        if path.is_dir():
            for sub in path.glob("test*"):
                _consider(sub)


def pytest_ignore_collect(collection_path: Path, config: Any) -> None:
    """Every path collection reaches, before its conftest or modules are imported; no
    opinion on ignoring it."""
    _consider(collection_path)
