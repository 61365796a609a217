"""Helpers shared by the tests split out of engine/test_task_adapters.py."""

from __future__ import annotations

import torch

NAN = float("nan")


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def logits(n: int, c: int, *rest: int, seed: int = 0, dtype: torch.dtype = torch.float64,
           grad: bool = False) -> torch.Tensor:
    out = torch.randn(n, c, *rest, generator=_gen(seed), dtype=dtype)
    return out.requires_grad_(grad)


def labels(n: int, c: int, *rest: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, c, (n, *rest), generator=_gen(seed))


def bits(n: int, k: int, seed: int = 2) -> torch.Tensor:
    return (torch.rand(n, k, generator=_gen(seed)) > 0.5).double()


def close(actual: torch.Tensor, expected: torch.Tensor, rel: float = 1e-12) -> None:
    """Same dtype and shape, equal within ``rel`` (float64 throughout unless noted)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    assert torch.allclose(actual.detach(), expected.detach(), rtol=rel, atol=rel), (
        actual, expected)


def ratio(parts: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
    return parts[0] / parts[1]
