"""LogitsChain and its builder (spec §2.4): processors applied in NNx's canonical order.

The builder's setters may be called in any order; ``build()`` always yields
RepetitionPenalty → TopKFilter → TopPFilter → TemperatureScaling, then custom
processors in the order they were added. The penalty reads raw logits, the
filters pick the candidate set on unscaled logits, and temperature runs last
so it reshapes only the distribution that is actually sampled (docs/lm.md §5).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from nnx.generation.processors import (
    LogitsProcessor,
    RepetitionPenalty,
    TemperatureScaling,
    TopKFilter,
    TopPFilter,
)

__all__ = ["LogitsChain", "LogitsChainBuilder"]


class LogitsChain:
    """An ordered, immutable sequence of processors, itself a processor."""

    __slots__ = ("_processors",)

    def __init__(self, processors: Sequence[LogitsProcessor] = ()) -> None:
        for i, p in enumerate(processors):
            if not callable(p):
                raise TypeError(
                    f"LogitsChain processors[{i}] must be called as processor(logits, history); "
                    f"got {type(p).__name__}"
                )
        self._processors: tuple[LogitsProcessor, ...] = tuple(processors)

    @staticmethod
    def builder() -> LogitsChainBuilder:
        """A fresh builder (spec §2.4)."""
        return LogitsChainBuilder()

    @classmethod
    def standard(
        cls,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        repetition_penalty: float | None = None,
    ) -> LogitsChain:
        """The chain ``generate``'s scalar kwargs mean; ``None`` / 1.0 add nothing."""
        b = cls.builder()
        if repetition_penalty is not None:
            b.repetition_penalty(repetition_penalty)
        if top_k is not None:
            b.top_k(top_k)
        if top_p is not None:
            b.top_p(top_p)
        # Validate even the neutral value, so temperature=float("nan") is refused.
        scaling = TemperatureScaling(temperature)
        if scaling.temperature != 1:
            b.temperature(temperature)
        return b.build()

    @property
    def processors(self) -> tuple[LogitsProcessor, ...]:
        return self._processors

    def __call__(self, logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        out = logits
        for processor in self._processors:
            out = processor(out, history)
        return out

    def __iter__(self) -> Iterator[LogitsProcessor]:
        return iter(self._processors)

    def __len__(self) -> int:
        return len(self._processors)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LogitsChain) and self._processors == other._processors

    def __hash__(self) -> int:
        return hash(self._processors)

    def __repr__(self) -> str:
        return f"LogitsChain({list(self._processors)!r})"


class LogitsChainBuilder:
    """Mutable builder: each setter validates, replaces its slot and returns ``self``.

    A refused value raises before the slot is touched, so the builder is
    unchanged by a failed call.
    """

    __slots__ = ("_custom", "_penalty", "_temperature", "_top_k", "_top_p")

    def __init__(self) -> None:
        self._penalty: RepetitionPenalty | None = None
        self._top_k: TopKFilter | None = None
        self._top_p: TopPFilter | None = None
        self._temperature: TemperatureScaling | None = None
        self._custom: list[LogitsProcessor] = []

    def repetition_penalty(self, penalty: float) -> LogitsChainBuilder:
        self._penalty = RepetitionPenalty(penalty)
        return self

    def top_k(self, k: int) -> LogitsChainBuilder:
        self._top_k = TopKFilter(k)
        return self

    def top_p(self, p: float) -> LogitsChainBuilder:
        self._top_p = TopPFilter(p)
        return self

    def temperature(self, temperature: float) -> LogitsChainBuilder:
        self._temperature = TemperatureScaling(temperature)
        return self

    def custom(self, processor: LogitsProcessor) -> LogitsChainBuilder:
        """Append a processor; customs run after the standard ones, in the order added."""
        if not callable(processor):
            raise TypeError(
                "LogitsChainBuilder.custom processor must be called as "
                f"processor(logits, history); got {type(processor).__name__}"
            )
        self._custom.append(processor)
        return self

    def copy(self) -> LogitsChainBuilder:
        """An independent branch: later setters on either never reach the other."""
        twin = LogitsChainBuilder()
        twin._penalty, twin._top_k = self._penalty, self._top_k
        twin._top_p, twin._temperature = self._top_p, self._temperature
        twin._custom = list(self._custom)
        return twin

    def build(self) -> LogitsChain:
        standard = (self._penalty, self._top_k, self._top_p, self._temperature)
        return LogitsChain([p for p in standard if p is not None] + self._custom)
