"""The I-JEPA and DPO names nnx-paradigms announces resolve from ``nnx`` (entry points) and
from nnx.paradigms to the same objects."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

import nnx
import nnx.paradigms

ROOT = Path(__file__).resolve().parents[1]
#: The I-JEPA and DPO modules (a trailing ``:`` is one module).
MODULES = ("nnx.paradigms.jepa:", "nnx.paradigms.jepa_objective:", "nnx.paradigms.dpo:",
           "nnx.paradigms.preference:")
# The names are the pyproject's nnx.exports entry points (the one list of them) whose
# target lies in those modules, so a name added there is checked with no edit here.
EXPORTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][
    "nnx.exports"]
NAMES = tuple(name for name, target in EXPORTS.items() if target.startswith(MODULES))


def test_every_name_resolves_from_nnx_to_the_same_object():
    # Each module still announces a name: a renamed module fails here, not silently.
    assert all(any(t.startswith(m) for t in EXPORTS.values()) for m in MODULES)
    for name in NAMES:
        assert getattr(nnx, name) is getattr(nnx.paradigms, name), name
        assert name in nnx.paradigms.__all__


def test_the_spec_import_line_works():
    from nnx import dpo_train_step_factory, jepa_train_step_factory  # noqa: F401  (§10)
