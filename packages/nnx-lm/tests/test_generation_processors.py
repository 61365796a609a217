"""nnx.generation processors: the worked number, parity with transformers, refusals."""

from __future__ import annotations

import math
import re

import pytest
import torch

from nnx.generation import (
    LogitsProcessor,
    RepetitionPenalty,
    TemperatureScaling,
    TopKFilter,
    TopPFilter,
)

transformers = pytest.importorskip("transformers")


def test_repetition_penalty_worked_number() -> None:
    logits = torch.tensor([2.0, -1.0, 0.5, 1.0])
    out = RepetitionPenalty(1.2)(logits, torch.tensor([0, 1, 0]))
    torch.testing.assert_close(out, torch.tensor([1.666667, -1.2, 0.5, 1.0]), atol=1e-6, rtol=0)
    # The input is never written into.
    assert logits.tolist() == [2.0, -1.0, 0.5, 1.0]


def _random(seed: int, batch: int = 4, vocab: int = 50, seq: int = 12):
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(batch, vocab, generator=g) * 3
    history = torch.randint(0, vocab, (batch, seq), generator=g)
    return logits, history


def _hf_pairs():
    from transformers import (
        RepetitionPenaltyLogitsProcessor,
        TemperatureLogitsWarper,
        TopKLogitsWarper,
        TopPLogitsWarper,
    )

    return [
        (RepetitionPenalty(1.3), RepetitionPenaltyLogitsProcessor(1.3)),
        (RepetitionPenalty(0.7), RepetitionPenaltyLogitsProcessor(0.7)),
        (TopKFilter(1), TopKLogitsWarper(1)),
        (TopKFilter(7), TopKLogitsWarper(7)),
        (TopKFilter(500), TopKLogitsWarper(500)),
        (TopPFilter(0.05), TopPLogitsWarper(0.05)),
        (TopPFilter(0.5), TopPLogitsWarper(0.5)),
        (TopPFilter(0.9), TopPLogitsWarper(0.9)),
        (TopPFilter(1.0), TopPLogitsWarper(1.0)),
        (TemperatureScaling(0.7), TemperatureLogitsWarper(0.7)),
        (TemperatureScaling(2.5), TemperatureLogitsWarper(2.5)),
    ]


@pytest.mark.parametrize("seed", range(5))
def test_each_processor_matches_transformers_on_batches(seed: int) -> None:
    logits, history = _random(seed)
    for ours, theirs in _hf_pairs():
        expected = theirs(history, logits.clone())
        torch.testing.assert_close(ours(logits, history), expected, atol=1e-6, rtol=1e-6,
                                   msg=lambda m, o=ours: f"{o!r}: {m}")


def test_one_dimensional_logits_match_the_batched_row() -> None:
    logits, history = _random(9, batch=1)
    for ours, theirs in _hf_pairs():
        out = ours(logits[0], history[0])
        assert out.shape == (logits.shape[1],)
        torch.testing.assert_close(out, theirs(history, logits.clone())[0], atol=1e-6, rtol=1e-6)


def test_processors_satisfy_the_protocol() -> None:
    for ours, _ in _hf_pairs():
        assert isinstance(ours, LogitsProcessor)


def test_temperature_zero_is_greedy() -> None:
    logits, history = _random(3)
    out = TemperatureScaling(0)(logits, history)
    best = logits.argmax(dim=-1)
    assert torch.equal(out.argmax(dim=-1), best)
    assert torch.isfinite(out).sum(dim=-1).tolist() == [1] * logits.shape[0]
    # Sampling from it can only return the argmax.
    probs = out.softmax(dim=-1)
    assert torch.equal(torch.multinomial(probs, 1).squeeze(1), best)


def test_empty_history_changes_nothing() -> None:
    logits = torch.tensor([1.0, -2.0])
    out = RepetitionPenalty(2.0)(logits, torch.tensor([], dtype=torch.long))
    assert out.tolist() == [1.0, -2.0]


def test_bad_logits_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="TopKFilter takes logits of shape"):
        TopKFilter(2)(torch.zeros(1, 2, 3), torch.zeros(1, 1, dtype=torch.long))


@pytest.mark.parametrize(
    ("build", "value", "name"),
    [
        (RepetitionPenalty, 0.0, "RepetitionPenalty.penalty"),
        (RepetitionPenalty, -1.0, "RepetitionPenalty.penalty"),
        (RepetitionPenalty, math.nan, "RepetitionPenalty.penalty"),
        (RepetitionPenalty, math.inf, "RepetitionPenalty.penalty"),
        (RepetitionPenalty, True, "RepetitionPenalty.penalty"),
        (RepetitionPenalty, "1.2", "RepetitionPenalty.penalty"),
        (TopKFilter, 0, "TopKFilter.k"),
        (TopKFilter, 2.0, "TopKFilter.k"),
        (TopKFilter, True, "TopKFilter.k"),
        (TopKFilter, "3", "TopKFilter.k"),
        (TopKFilter, math.nan, "TopKFilter.k"),
        (TopPFilter, 0.0, "TopPFilter.p"),
        (TopPFilter, 1.5, "TopPFilter.p"),
        (TopPFilter, math.nan, "TopPFilter.p"),
        (TopPFilter, False, "TopPFilter.p"),
        (TemperatureScaling, -0.1, "TemperatureScaling.temperature"),
        (TemperatureScaling, math.inf, "TemperatureScaling.temperature"),
        (TemperatureScaling, "0.7", "TemperatureScaling.temperature"),
    ],
)
def test_refusals_name_the_argument(build, value, name: str) -> None:
    with pytest.raises(ValueError, match=re.escape(name)):
        build(value)


def test_numpy_scalars_are_normalized() -> None:
    np = pytest.importorskip("numpy")
    assert type(TopKFilter(np.int64(3)).k) is int
    assert type(TopPFilter(np.float32(0.5)).p) is float
