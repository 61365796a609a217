"""Typed questions, validate_response and the results (spec §17)."""

from __future__ import annotations

import math

import pytest

from nnx.decisions import (
    SUM_TOLERANCE,
    Boolean,
    BooleanResult,
    Choice,
    ChoiceResult,
    InvalidDecisionRequest,
    InvalidDecisionResponse,
    Option,
    Score,
    ScoreResult,
    question_from_state,
    validate_response,
)

ANIMAL = Choice("Which animal is this?", [("cat", "A cat"), ("dog", "A dog"), ("fox", "A fox")])
URGENCY = Score("How urgent?", [("low", "Can wait"), ("mid", "This week"), ("high", "Today")])
SPAM = Boolean("Is this spam?")


def test_options_need_two_unique_non_empty_ids() -> None:
    with pytest.raises(InvalidDecisionRequest, match="at least 2"):
        Choice("q", [("a", "A")])
    with pytest.raises(InvalidDecisionRequest, match="repeats option id"):
        Choice("q", [("a", "A"), ("a", "B")])
    with pytest.raises(InvalidDecisionRequest, match=r"Option\.id"):
        Score("q", [("", "A"), ("b", "B")])
    with pytest.raises(InvalidDecisionRequest, match="prompt"):
        Boolean("  ")
    assert Choice("q", {"a": "A", "b": "B"}).options == (Option("a", "A"), Option("b", "B"))


def test_digest_changes_when_options_are_reordered_or_reworded() -> None:
    same = Choice("Which animal is this?", [Option("cat", "A cat"), Option("dog", "A dog"),
                                            Option("fox", "A fox")])
    assert same.digest() == ANIMAL.digest()
    reordered = Choice(ANIMAL.prompt, list(reversed(ANIMAL.options)))
    reworded = Choice(ANIMAL.prompt, [("cat", "A kitten"), ("dog", "A dog"), ("fox", "A fox")])
    renamed = Choice(ANIMAL.prompt, [("feline", "A cat"), ("dog", "A dog"), ("fox", "A fox")])
    prompt = Choice("Which one?", ANIMAL.options)
    digests = {q.digest() for q in (ANIMAL, reordered, reworded, renamed, prompt)}
    assert len(digests) == 5
    # A Choice and a Score with the same texts are different questions.
    assert Score(ANIMAL.prompt, ANIMAL.options).digest() != ANIMAL.digest()


def test_question_state_round_trips_and_refuses_malformed_state() -> None:
    for q in (ANIMAL, URGENCY, SPAM):
        again = question_from_state(q.to_state())
        assert again == q and again.digest() == q.digest()
    for bad, message in (
            ({"kind": "ranking", "prompt": "q"}, "kind must be"),
            ({"kind": "boolean"}, "missing"),
            ({"kind": "boolean", "prompt": "q", "extra": 1}, "unknown"),
            ({"kind": "choice", "prompt": "q", "options": [{"id": "a"}]}, "exactly the keys"),
            ({"format": "other/1", "kind": "boolean", "prompt": "q"}, "format"),
            ([1, 2], "mapping")):
        with pytest.raises(InvalidDecisionRequest, match=message):
            question_from_state(bad)


def test_keyed_output_is_reordered_into_the_question_order() -> None:
    result = validate_response(ANIMAL, {"fox": 0.125, "cat": 0.5, "dog": 0.375}, provider="t",
                               raw={"vendor": "payload"})
    assert isinstance(result, ChoiceResult)
    assert result.probabilities == (0.5, 0.375, 0.125)
    assert result.choice == "cat" and result.probability("fox") == 0.125
    assert result.raw == {"vendor": "payload"}
    pairs = validate_response(ANIMAL, [("dog", 0.375), ("fox", 0.125), ("cat", 0.5)],
                              provider="t")
    assert pairs.probabilities == result.probabilities


@pytest.mark.parametrize("output, message", [
    ({"cat": 0.5, "dog": 0.5}, r"missing \['fox'\]"),
    ({"cat": 0.5, "dog": 0.25, "fox": 0.125, "owl": 0.125}, r"unknown \['owl'\]"),
    ([("cat", 0.5), ("cat", 0.25), ("fox", 0.25)], "duplicate id 'cat'"),
    ([0.5, 0.25, 0.25], "unlabeled"),
    ([("cat", 0.5), (None, 0.25), ("fox", 0.25)], "unlabeled"),
    ({"cat": math.nan, "dog": 0.5, "fox": 0.5}, "not finite"),
    ({"cat": math.inf, "dog": 0.5, "fox": 0.5}, "not finite"),
    ({"cat": -0.25, "dog": 0.75, "fox": 0.5}, "outside"),
    ({"cat": "0.5", "dog": 0.25, "fox": 0.25}, "not a number"),
    ({"cat": True, "dog": 0.0, "fox": 0.0}, "not a number"),
    ({"cat": 0.5, "dog": 0.5, "fox": 0.5}, "sum to"),
    ("cat", "keyed"),
])
def test_malformed_answers_are_refused(output: object, message: str) -> None:
    with pytest.raises(InvalidDecisionResponse, match=message):
        validate_response(ANIMAL, output, provider="t")


def test_a_slightly_off_distribution_is_refused_never_renormalized() -> None:
    off = {"cat": 0.5, "dog": 0.25, "fox": 0.25 + 3 * SUM_TOLERANCE}
    with pytest.raises(InvalidDecisionResponse, match="never renormalized"):
        validate_response(ANIMAL, off, provider="t")
    within = {"cat": 0.5, "dog": 0.25, "fox": 0.25 + SUM_TOLERANCE / 2}
    kept = validate_response(ANIMAL, within, provider="t")
    assert kept.probabilities[2] == 0.25 + SUM_TOLERANCE / 2  # as given, not rescaled


def test_score_expected_index_is_ordinal_and_vendor_score_apart() -> None:
    result = validate_response(URGENCY, {"high": 0.5, "low": 0.25, "mid": 0.25}, provider="t",
                               vendor_score=1.7, confidence=0.9)
    assert isinstance(result, ScoreResult)
    assert result.expected_index == 0 * 0.25 + 1 * 0.25 + 2 * 0.5
    assert result.vendor_score == 1.7 and result.confidence == 0.9
    assert result.level == "high"
    with pytest.raises(InvalidDecisionResponse, match="vendor_score"):
        validate_response(ANIMAL, {"cat": 1.0, "dog": 0.0, "fox": 0.0}, provider="t",
                          vendor_score=1.0)


def test_boolean_holds_one_p_true() -> None:
    result = validate_response(SPAM, 0.75, provider="t")
    assert isinstance(result, BooleanResult) and result.p_true == 0.75
    assert result.p_false == 0.25
    assert validate_response(SPAM, {"p_true": 0.25}, provider="t").p_true == 0.25
    for bad in (1.5, math.nan, {"p_true": 0.5, "p_false": 0.5}, "yes"):
        with pytest.raises(InvalidDecisionResponse):
            validate_response(SPAM, bad, provider="t")
    with pytest.raises(InvalidDecisionResponse, match="confidence"):
        validate_response(SPAM, 0.5, provider="t", confidence=2.0)


def test_ties_go_to_the_question_order() -> None:
    tie = validate_response(ANIMAL, {"fox": 0.5, "dog": 0.5, "cat": 0.0}, provider="t")
    assert tie.choice == "dog"
