"""The distillation names nnx-paradigms announces resolve from ``nnx`` and nnx.paradigms."""

from __future__ import annotations

import nnx
import nnx.paradigms
import nnx.paradigms.offline_distillation as offline

NAMES = ("kd_train_step_factory", "feature_kd_train_step_factory", "born_again_train",
         "TeacherRecord", "TeacherRecordError", "TeacherDataset", "read_teacher_records",
         "evaluate_offline")


def test_every_name_resolves_from_nnx_to_the_same_object():
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
