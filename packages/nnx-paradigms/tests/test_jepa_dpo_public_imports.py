"""The I-JEPA and DPO names nnx-paradigms announces resolve from ``nnx`` (entry points) and
from nnx.paradigms to the same objects."""

from __future__ import annotations

import nnx
import nnx.paradigms

NAMES = ("jepa_train_step_factory", "jepa_objective", "dpo_train_step_factory",
         "NNPreferenceDataset")


def test_every_name_resolves_from_nnx_to_the_same_object():
    for name in NAMES:
        assert getattr(nnx, name) is getattr(nnx.paradigms, name), name
        assert name in nnx.paradigms.__all__


def test_the_spec_import_line_works():
    from nnx import dpo_train_step_factory, jepa_train_step_factory  # noqa: F401  (§10)
