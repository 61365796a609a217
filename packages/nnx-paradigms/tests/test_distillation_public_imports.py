"""The distillation names nnx-paradigms announces resolve from ``nnx`` and nnx.paradigms."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

import nnx
import nnx.paradigms
import nnx.paradigms.offline_distillation as offline

ROOT = Path(__file__).resolve().parents[1]
#: The distillation modules (a trailing ``:`` is one module, a ``.`` a package).
MODULES = ("nnx.paradigms.kd:", "nnx.paradigms.born_again:",
           "nnx.paradigms.offline_distillation.")
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


def test_the_offline_names_are_the_submodules_own():
    for name in ("TeacherRecord", "TeacherRecordError", "TeacherDataset", "read_teacher_records",
                 "evaluate_offline"):
        assert getattr(offline, name) is getattr(nnx.paradigms, name)


def test_the_spec_import_lines_work():
    from nnx import born_again_train, feature_kd_train_step_factory, kd_train_step_factory  # noqa: F401
    from nnx.paradigms.offline_distillation import (  # noqa: F401  (spec §10.1, verbatim)
        TeacherDataset,
        evaluate_offline,
        read_teacher_records,
    )
