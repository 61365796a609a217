"""What an extra's à-la-carte cell runs: the tests that use the packages the extra adds.

A third-party extra (``nnx-core[onnx]``, ``nnx-decisions[jev]``) is tested by the few
test files that import its packages or ``pytest.importorskip`` them, not by the whole
suite again, and such a test skipping for want of them fails the cell: the extra is
installed, so that skip means it is broken. An extra that pulls another nnx
distribution (``nnx-peft[lm]``) crosses into code throughout, so its cell runs the
whole suite. Used by tools/check_alacarte.py; standard library only.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

# Run in the cell's venv (the modules a distribution installs are known only there):
# the top-level modules the distributions named by argv[1] (a JSON list) install.
IMPORT_NAMES = """
import json, re, sys
from importlib.metadata import packages_distributions
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
wanted = set(json.loads(sys.argv[1]))
print(json.dumps(sorted(m for m, ds in packages_distributions().items()
                        if m.isidentifier() and not m.startswith("_")
                        and wanted & {norm(d) for d in ds})))
"""


def third_party_added(requires: Sequence[str], extra_requires: Mapping[str, Sequence[str]],
                      extras: Sequence[str]) -> list[str]:
    """The packages ``extras`` add beyond the plain ``requires`` when all are third-party
    (the cell then runs only the tests importing them); [] when an extra pulls an nnx
    distribution (the whole suite runs) or there is no extra."""
    added = {r for e in extras for r in extra_requires[e]} - set(requires)
    return [] if any(r.startswith("nnx-") for r in added) else sorted(added)


def tests_needing(tests: Path, modules: Sequence[str]) -> list[Path]:
    """The test files under ``tests`` that import one of ``modules`` (or a submodule)
    or ``pytest.importorskip`` it."""
    uses = re.compile(rf"""importorskip\(\s*["']{_any(modules)}["'.]"""
                      rf"|^\s*(?:import|from)\s+{_any(modules)}\b", re.M)
    return sorted(f for f in tests.rglob("test_*.py") if uses.search(f.read_text()))


def skipped_for_want_of(pytest_output: str, modules: Sequence[str]) -> list[str]:
    """The ``-rs`` summary lines of tests skipped because one of ``modules`` would not
    import."""
    return re.findall(rf"^SKIPPED.*could not import '{_any(modules)}(?:\.[^']*)?'.*$",
                      pytest_output, re.M)


def _any(modules: Sequence[str]) -> str:
    return "(?:" + "|".join(map(re.escape, modules)) + ")"
