"""LogitsChain.builder(): the canonical order (spec §2.4), customs after, refusals."""

from __future__ import annotations

import itertools
import math
import re

import pytest
import torch

from nnx.generation import (
    LogitsChain,
    RepetitionPenalty,
    TemperatureScaling,
    TopKFilter,
    TopPFilter,
)

SETTERS = {
    "repetition_penalty": 1.2,
    "top_k": 5,
    "top_p": 0.9,
    "temperature": 0.7,
}
CANONICAL = [RepetitionPenalty(1.2), TopKFilter(5), TopPFilter(0.9), TemperatureScaling(0.7)]


def _double(logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
    return logits * 2


def _shift(logits: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
    return logits + 1


@pytest.mark.parametrize("order", list(itertools.permutations(SETTERS)))
def test_every_builder_order_gives_the_canonical_chain(order: tuple[str, ...]) -> None:
    b = LogitsChain.builder()
    for name in order:
        getattr(b, name)(SETTERS[name])
    assert list(b.build()) == CANONICAL


@pytest.mark.parametrize("position", range(5))
def test_customs_follow_the_standard_processors_in_the_order_added(position: int) -> None:
    steps: list[tuple[str, object]] = list(SETTERS.items())
    steps.insert(position, ("custom", _double))
    steps.append(("custom", _shift))
    b = LogitsChain.builder()
    for name, value in reversed(steps):  # reversed: standard order is not the call order
        getattr(b, name)(value)
    chain = b.build()
    # Customs keep the order they were added in (reversed here: _shift first).
    assert list(chain) == [*CANONICAL, _shift, _double]


def test_only_the_set_processors_appear_and_the_last_value_wins() -> None:
    chain = LogitsChain.builder().temperature(0.5).top_k(3).temperature(0.8).build()
    assert list(chain) == [TopKFilter(3), TemperatureScaling(0.8)]
    assert len(LogitsChain.builder().build()) == 0


def test_a_chain_is_applied_like_a_processor() -> None:
    logits = torch.tensor([[2.0, -1.0, 0.5, 1.0], [0.1, 0.2, 0.3, 0.4]])
    history = torch.tensor([[0, 1], [3, 3]])
    chain = LogitsChain.builder().temperature(0.5).custom(_shift).repetition_penalty(1.2).build()
    expected = _shift(TemperatureScaling(0.5)(RepetitionPenalty(1.2)(logits, history), history),
                      history)
    torch.testing.assert_close(chain(logits, history), expected)
    # A chain nests inside another as a custom processor.
    outer = LogitsChain.builder().custom(chain).build()
    torch.testing.assert_close(outer(logits, history), expected)


def test_standard_matches_the_builder() -> None:
    chain = LogitsChain.standard(temperature=0.7, top_k=5, top_p=0.9, repetition_penalty=1.2)
    assert list(chain) == CANONICAL
    assert list(LogitsChain.standard()) == []
    assert list(LogitsChain.standard(temperature=0)) == [TemperatureScaling(0)]
    with pytest.raises(ValueError, match=r"TemperatureScaling\.temperature"):
        LogitsChain.standard(temperature=math.nan)


def test_copy_branches_the_builder() -> None:
    base = LogitsChain.builder().top_k(4).custom(_double)
    branch = base.copy().top_p(0.5).custom(_shift)
    assert list(base.build()) == [TopKFilter(4), _double]
    assert list(branch.build()) == [TopKFilter(4), TopPFilter(0.5), _double, _shift]


@pytest.mark.parametrize(
    ("setter", "value", "name"),
    [
        ("repetition_penalty", 0, "RepetitionPenalty.penalty"),
        ("top_k", 1.5, "TopKFilter.k"),
        ("top_p", 0, "TopPFilter.p"),
        ("temperature", math.nan, "TemperatureScaling.temperature"),
    ],
)
def test_a_refused_setter_changes_nothing(setter: str, value: object, name: str) -> None:
    b = LogitsChain.builder().repetition_penalty(1.1).top_k(3).top_p(0.8).temperature(0.9)
    before = list(b.build())
    with pytest.raises(ValueError, match=re.escape(name)):
        getattr(b, setter)(value)
    assert list(b.build()) == before


def test_a_non_callable_custom_is_refused() -> None:
    b = LogitsChain.builder()
    with pytest.raises(TypeError, match="custom processor"):
        b.custom(3)  # type: ignore[arg-type]
    assert len(b.build()) == 0
    with pytest.raises(TypeError, match=r"processors\[0\]"):
        LogitsChain(["x"])  # type: ignore[list-item]
