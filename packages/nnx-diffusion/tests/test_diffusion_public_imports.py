"""The names nnx-diffusion announces resolve from ``nnx`` (entry points) and nnx.diffusion."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest's own dependency reads TOML
    import tomli as tomllib

import nnx
import nnx.diffusion

ROOT = Path(__file__).resolve().parents[1]
# The announced names are the pyproject's nnx.exports entry points, the one list of them.
NAMES = tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())
              ["project"]["entry-points"]["nnx.exports"])


def test_every_name_resolves_from_nnx_to_the_same_object():
    assert NAMES
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
