"""Denoising diffusion (spec §9): DDPM schedules, the diffusion objective and step,
sampling.

``from nnx import NoiseSchedulers, DiffusionMLP, sample, ...`` resolves these names
through this distribution's ``nnx.exports`` entry points.
"""

from nnx.diffusion.net import DiffusionMLP
from nnx.diffusion.objective import DiffusionObjective, diffusion_objective
from nnx.diffusion.sampling import sample
from nnx.diffusion.schedules import NoiseSchedule, NoiseSchedulers
from nnx.diffusion.step import diffusion_train_step_factory

__all__: list[str] = [
    "DiffusionMLP",
    "DiffusionObjective",
    "NoiseSchedule",
    "NoiseSchedulers",
    "diffusion_objective",
    "diffusion_train_step_factory",
    "sample",
]
