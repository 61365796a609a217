"""DDPM noise schedules (spec §9.1): ``NoiseSchedulers.LINEAR`` / ``COSINE`` → ``NoiseSchedule``.

An enum-as-factory like ``Optims`` or ``Schedulers``: calling a member builds a
frozen :class:`NoiseSchedule` of precomputed CPU float32 tensors. The betas are
built the way diffusers' ``DDPMScheduler`` builds them (so they match it bit for
bit): LINEAR is ``torch.linspace`` in float32 (a float64 linspace cast down
differs in the last bit of a third of the entries), COSINE is the Nichol &
Dhariwal ᾱ(t) in Python floats, each beta capped at 0.999. Everything derived
from the betas (alphas, ᾱ, the square roots, the posterior variance) is computed
in float64 and cast once, so no cumulative-product error builds up in float32.

Nothing serializes a schedule: it is recoverable from ``(kind, T, args)``.
``fingerprint`` (T and a hash of the betas) is what a ``diffusion_objective``
resume compares.
"""

from __future__ import annotations

import enum
import hashlib
import math
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

import torch

from nnx.extend import OPEN_UNIT, POSITIVE, check_count, check_real

__all__ = ["COSINE_MAX_BETA", "NoiseSchedule", "NoiseSchedulers"]

#: diffusers' ``betas_for_alpha_bar`` cap: the last cosine betas would reach 1 otherwise.
COSINE_MAX_BETA = 0.999

_TABLES = ("betas", "alphas", "alphas_cumprod", "sqrt_alphas_cumprod",
           "sqrt_one_minus_alphas_cumprod", "posterior_variance")


@dataclass(frozen=True, eq=False)
class NoiseSchedule:
    """A DDPM schedule: ``T`` steps of precomputed float32 tensors, built on CPU.

    ``posterior_variance[t]`` is β̃_t = β_t (1 − ᾱ_{t−1}) / (1 − ᾱ_t) with ᾱ_{−1} = 1,
    so it is 0 at t = 0 (the sampler adds no noise there). :meth:`to` returns the
    same schedule on another device, cached per device.
    """

    kind: str
    T: int
    args: MappingProxyType[str, float]
    betas: torch.Tensor
    alphas: torch.Tensor
    alphas_cumprod: torch.Tensor
    sqrt_alphas_cumprod: torch.Tensor
    sqrt_one_minus_alphas_cumprod: torch.Tensor
    posterior_variance: torch.Tensor
    _on: dict[str, NoiseSchedule] = field(default_factory=dict, repr=False)

    @property
    def device(self) -> torch.device:
        return self.betas.device

    @property
    def fingerprint(self) -> str:
        """``T`` and the betas' SHA-256 (their float32 bytes): equal iff the schedules train
        alike, whatever arguments spelled them."""
        digest = hashlib.sha256(self.betas.detach().cpu().contiguous().numpy().tobytes())
        return f"T={self.T}:sha256={digest.hexdigest()[:16]}"

    def describe(self) -> dict[str, Any]:
        """``{kind, T, args, fingerprint}``: plain data (a component state, a log line)."""
        return {"kind": self.kind, "T": self.T, "args": dict(self.args),
                "fingerprint": self.fingerprint}

    def to(self, device: torch.device | str) -> NoiseSchedule:
        """This schedule's tensors on ``device``, moved once and cached (the train step and
        the sampler call it on every batch; only the first call per device copies)."""
        device = torch.device(device)
        if device == self.device:
            return self
        key = str(device)
        moved = self._on.get(key)
        if moved is None:
            tables = {name: getattr(self, name).to(device) for name in _TABLES}
            moved = replace(self, **tables, _on={})
            self._on[key] = moved
        return moved

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"NoiseSchedulers.{self.kind}(T={self.T}, {args})"


def _schedule(kind: str, T: int, args: dict[str, float], betas: torch.Tensor) -> NoiseSchedule:
    b = betas.double()
    alphas = 1.0 - b
    cumprod = torch.cumprod(alphas, dim=0)
    previous = torch.cat([torch.ones(1, dtype=torch.float64), cumprod[:-1]])
    posterior = b * (1.0 - previous) / (1.0 - cumprod)
    return NoiseSchedule(
        kind=kind, T=T, args=MappingProxyType(dict(args)), betas=betas.float(),
        alphas=alphas.float(), alphas_cumprod=cumprod.float(),
        sqrt_alphas_cumprod=cumprod.sqrt().float(),
        sqrt_one_minus_alphas_cumprod=(1.0 - cumprod).sqrt().float(),
        posterior_variance=posterior.float(),
    )


def _check_T(T: Any) -> int:
    return check_count("NoiseSchedulers T", T)


def linear(T: int = 1000, *, beta_min: float = 1e-4, beta_max: float = 2e-2) -> NoiseSchedule:
    T = _check_T(T)
    lo = float(check_real("NoiseSchedulers.LINEAR beta_min", beta_min, OPEN_UNIT))
    hi = float(check_real("NoiseSchedulers.LINEAR beta_max", beta_max, OPEN_UNIT))
    if not lo < hi:
        raise ValueError(f"NoiseSchedulers.LINEAR needs beta_min < beta_max; got "
                         f"beta_min={lo!r}, beta_max={hi!r}")
    # float32 linspace, exactly as diffusers' DDPMScheduler(beta_schedule="linear").
    betas = torch.linspace(lo, hi, T, dtype=torch.float32)
    return _schedule("LINEAR", T, {"beta_min": lo, "beta_max": hi}, betas)


def cosine(T: int = 1000, *, s: float = 0.008) -> NoiseSchedule:
    T = _check_T(T)
    s = float(check_real("NoiseSchedulers.COSINE s", s, POSITIVE))

    def alpha_bar(t: float) -> float:
        return math.cos((t + s) / (1 + s) * math.pi / 2) ** 2

    # Python floats, then one float32 tensor: diffusers' betas_for_alpha_bar to the bit.
    betas = [min(1 - alpha_bar((i + 1) / T) / alpha_bar(i / T), COSINE_MAX_BETA)
             for i in range(T)]
    return _schedule("COSINE", T, {"s": s}, torch.tensor(betas, dtype=torch.float32))


class NoiseSchedulers(enum.Enum):
    """``NoiseSchedulers.LINEAR(T=1000, beta_min=1e-4, beta_max=2e-2)`` and
    ``NoiseSchedulers.COSINE(T=1000, s=0.008)``: each returns a :class:`NoiseSchedule`.
    The arguments after ``T`` are keyword-only."""

    LINEAR = "linear"
    COSINE = "cosine"

    def __call__(self, T: int = 1000, **kwargs: float) -> NoiseSchedule:
        if self is NoiseSchedulers.LINEAR:
            return linear(T, **kwargs)
        return cosine(T, **kwargs)
