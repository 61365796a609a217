"""Denoising diffusion (spec §9): DDPM schedules, the diffusion objective and step,
sampling."""

__all__: list[str] = []
