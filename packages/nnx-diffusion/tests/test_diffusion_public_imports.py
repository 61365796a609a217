"""The names nnx-diffusion announces resolve from ``nnx`` (entry points) and nnx.diffusion."""

from __future__ import annotations

import nnx
import nnx.diffusion

NAMES = ("NoiseSchedulers", "NoiseSchedule", "DiffusionMLP", "DiffusionObjective",
         "diffusion_train_step_factory", "diffusion_objective", "sample")


def test_every_name_resolves_from_nnx_to_the_same_object():
    for name in NAMES:
        assert getattr(nnx, name) is getattr(nnx.diffusion, name), name
    assert sorted(nnx.diffusion.__all__) == sorted(NAMES)


def test_the_spec_import_line_works():
    from nnx import (  # noqa: F401  (spec §9's import, verbatim)
        DiffusionMLP,
        Losses,
        NNModel,
        NNModelParams,
        NNTrainParams,
        NoiseSchedulers,
        diffusion_train_step_factory,
        sample,
    )
