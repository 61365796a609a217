"""Generation (spec §2.4, §15): logits processors and LogitsChain.

A processor is called as ``processor(logits, history)``; a :class:`LogitsChain`
is one too, applying RepetitionPenalty → TopKFilter → TopPFilter →
TemperatureScaling and then custom processors (``LogitsChain.builder()``).
"""

from __future__ import annotations

from nnx.generation.chain import LogitsChain, LogitsChainBuilder
from nnx.generation.processors import (
    LogitsProcessor,
    RepetitionPenalty,
    TemperatureScaling,
    TopKFilter,
    TopPFilter,
)

__all__ = [
    "LogitsChain",
    "LogitsChainBuilder",
    "LogitsProcessor",
    "RepetitionPenalty",
    "TemperatureScaling",
    "TopKFilter",
    "TopPFilter",
]
