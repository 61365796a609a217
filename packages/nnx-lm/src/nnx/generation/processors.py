"""Logits processors (spec §15): one decoding step's ``logits`` → new logits.

Every processor is called as ``processor(logits, history)``: ``logits`` is
``(vocab,)`` or ``(batch, vocab)`` and ``history`` the ids so far, ``(seq,)`` or
``(batch, seq)``. A processor returns a new tensor and never writes into its
input, so a caller may keep the raw logits (the cache-vs-recompute tests do).
Arguments are checked with nnx-core's validator when the processor is built,
so a bad value is refused before any decoding starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import torch

from nnx.extend import NON_NEGATIVE, POSITIVE, Domain, check_count, check_real, set_field

__all__ = [
    "LogitsProcessor",
    "RepetitionPenalty",
    "TemperatureScaling",
    "TopKFilter",
    "TopPFilter",
]

#: top_p's domain: (0, 1]. Zero would keep nothing; 1 keeps everything.
TOP_P_DOMAIN = Domain(low=0.0, high=1.0, low_inclusive=False)


@runtime_checkable
class LogitsProcessor(Protocol):
    """Anything called as ``processor(logits, history) -> logits``."""

    def __call__(self, logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor: ...


def _rows(logits: torch.Tensor, owner: str) -> torch.Tensor:
    """``logits`` as ``(batch, vocab)``: 1-D logits become one row (a view)."""
    if logits.dim() == 1:
        return logits.unsqueeze(0)
    if logits.dim() == 2:
        return logits
    raise ValueError(
        f"{owner} takes logits of shape (vocab,) or (batch, vocab); got {tuple(logits.shape)}"
    )


def _shaped_like(out: torch.Tensor, logits: torch.Tensor) -> torch.Tensor:
    return out.squeeze(0) if logits.dim() == 1 else out


@dataclass(frozen=True, slots=True)
class RepetitionPenalty:
    """CTRL's penalty (Keskar et al. 2019) on every id already in ``history``.

    A seen id's positive logit is divided by ``penalty`` and a negative one
    multiplied, so ``penalty > 1`` always makes a repeat less likely.
    """

    penalty: float

    def __post_init__(self) -> None:
        set_field(self, "penalty", check_real("RepetitionPenalty.penalty", self.penalty, POSITIVE))

    def __call__(self, logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        rows = _rows(logits, "RepetitionPenalty")
        if history.numel() == 0:
            return logits.clone()
        # A 1-D history is the one sequence every row continues.
        ids = history.reshape(1, -1) if history.dim() == 1 else history
        ids = ids.to(device=rows.device, dtype=torch.long).expand(rows.shape[0], -1)
        seen = rows.gather(1, ids)
        penalized = torch.where(seen < 0, seen * self.penalty, seen / self.penalty)
        # scatter of a duplicated id writes the same value each time: order is moot.
        return _shaped_like(rows.scatter(1, ids, penalized), logits)


@dataclass(frozen=True, slots=True)
class TopKFilter:
    """Keeps the ``k`` largest logits of each row (ties with the k-th kept), the rest -inf."""

    k: int

    def __post_init__(self) -> None:
        set_field(self, "k", check_count("TopKFilter.k", self.k))

    def __call__(self, logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        rows = _rows(logits, "TopKFilter")
        k = min(self.k, rows.shape[-1])
        kth = torch.topk(rows, k, dim=-1).values[..., -1:]
        return _shaped_like(rows.masked_fill(rows < kth, -float("inf")), logits)


@dataclass(frozen=True, slots=True)
class TopPFilter:
    """Nucleus filtering (Holtzman et al. 2020): the smallest set of most likely
    ids whose probability reaches ``p`` is kept, the rest -inf; the most likely id
    always survives."""

    p: float

    def __post_init__(self) -> None:
        set_field(self, "p", check_real("TopPFilter.p", self.p, TOP_P_DOMAIN))

    def __call__(self, logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        rows = _rows(logits, "TopPFilter")
        if self.p >= 1.0:
            # The whole distribution: skip the cumsum, whose rounding could drop a tail id.
            return logits.clone()
        ascending, order = torch.sort(rows, dim=-1)
        cumulative = ascending.softmax(dim=-1).cumsum(dim=-1)
        drop = cumulative <= (1.0 - self.p)
        drop[..., -1] = False
        mask = drop.scatter(1, order, drop)
        return _shaped_like(rows.masked_fill(mask, -float("inf")), logits)


@dataclass(frozen=True, slots=True)
class TemperatureScaling:
    """Divides logits by ``temperature``; ``temperature == 0`` is greedy decoding.

    At 0 every id but each row's argmax (the first, on a tie) becomes -inf, so
    sampling from the result always returns the argmax. This is why temperature
    runs last in a chain (§2.4): the filters before it see unscaled logits.
    """

    temperature: float

    def __post_init__(self) -> None:
        set_field(
            self,
            "temperature",
            check_real("TemperatureScaling.temperature", self.temperature, NON_NEGATIVE),
        )

    def __call__(self, logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        rows = _rows(logits, "TemperatureScaling")
        if self.temperature == 0:
            best = rows.argmax(dim=-1, keepdim=True)
            keep = torch.zeros_like(rows, dtype=torch.bool).scatter(1, best, True)
            return _shaped_like(rows.masked_fill(~keep, -float("inf")), logits)
        return _shaped_like(rows / self.temperature, logits)
