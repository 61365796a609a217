"""The §27 decision wrappers and nnx.abstention.decide over a typed decision (§19)."""

from __future__ import annotations

import pytest
import torch
from _decision_models import Counting, classifier

from nnx.abstention import AbstentionPolicy, AbstentionSchemaError, SelectiveDecision, decide
from nnx.decisions import (
    Boolean,
    Choice,
    ChoiceResult,
    FixedHeadProvider,
    InvalidDecisionResponse,
    JevError,
    ProviderFailure,
    decide_result,
    validate_decision_request_result,
    validate_response,
)
from nnx.result import BoundaryError, Err, Ok, UnwrapError

ANIMAL = Choice("Which animal?", [("cat", "A cat"), ("dog", "A dog"), ("fox", "A fox")])
X = torch.randn(4, 4, generator=torch.Generator().manual_seed(3))


def test_validate_decision_request_result() -> None:
    ok = validate_decision_request_result(ANIMAL.to_state())
    assert ok == Ok(ANIMAL)
    bad = validate_decision_request_result({"kind": "choice", "prompt": "q", "options": []})
    assert isinstance(bad, Err) and isinstance(bad.error, BoundaryError)
    assert bad.error.code == "invalid_decision_request"
    assert bad.error.where == "validate_decision_request_result"
    assert bad.error.context["data"]["prompt"] == "q"
    with pytest.raises(UnwrapError):
        bad.unwrap()


def test_decide_result_ok_and_chained_with_bind() -> None:
    provider = FixedHeadProvider(classifier(), labels=("cat", "dog", "fox"))
    chained = validate_decision_request_result(ANIMAL.to_state()).bind(
        lambda q: decide_result(provider, q, X))
    assert isinstance(chained, Ok) and len(chained.value) == 4
    assert chained.value == provider.decide(ANIMAL, X)


class Answers:
    """A provider that answers with what it is given, or raises what it is given."""

    name = "answers"

    def __init__(self, answer=None, raises: BaseException | None = None) -> None:
        self.answer, self.raises = answer, raises

    def capabilities(self):
        return Counting(kinds=("choice",)).capabilities()

    def decide(self, question, inputs):
        if self.raises is not None:
            raise self.raises
        return tuple(validate_response(question, self.answer, provider=self.name)
                     for _ in inputs)


@pytest.mark.parametrize("provider, question, code", [
    (Answers({"cat": 0.5, "dog": 0.5}), ANIMAL, "invalid_decision_response"),
    (Answers({"cat": 0.5, "dog": 0.25, "fox": 0.26}), ANIMAL, "invalid_decision_response"),
    (Answers(raises=ProviderFailure("down")), ANIMAL,
     "provider_failure"),
    (Answers(raises=JevError("503", request_id="r-1")),
     ANIMAL, "provider_failure"),
    (Answers({"p_true": 0.5}), Boolean("b?"), "unsupported_capability"),
])
def test_decide_result_converts_exactly_the_declared_errors(provider, question, code) -> None:
    out = decide_result(provider, question, [0])
    assert isinstance(out, Err) and out.error.code == code
    assert out.error.where == "decide_result" and out.error.context["provider"] == "answers"
    assert out.error.cause is not None


@pytest.mark.parametrize("error", [RuntimeError("a bug"), KeyboardInterrupt(), ValueError("v")])
def test_anything_else_propagates(error: BaseException) -> None:
    with pytest.raises(type(error)):
        decide_result(Answers(raises=error), ANIMAL, [0])


def test_an_abstention_is_a_success() -> None:
    policy = AbstentionPolicy("margin", 0.5, labels=("cat", "dog", "fox"), model_id="m-1")
    provider = Answers({"cat": 0.7, "dog": 0.2, "fox": 0.1})
    out = decide_result(provider, ANIMAL, [0, 1], policy=policy, model_id="m-1")
    assert isinstance(out, Ok) and len(out.value) == 2
    first = out.value[0]
    assert isinstance(first, SelectiveDecision)
    # float64: 0.7 - 0.2 = 0.49999999999999994 < 0.5, so the row abstains
    assert first.abstained and first.reason == "small_margin"
    assert first.score == 0.7 - 0.2
    assert first.prediction == "cat" and first.distribution == {"cat": 0.7, "dog": 0.2,
                                                                 "fox": 0.1}
    with pytest.raises(TypeError, match="model_id"):
        decide_result(provider, ANIMAL, [0], policy=policy)


def test_decide_keeps_the_result_unchanged_and_checks_the_schema_first() -> None:
    result = validate_response(ANIMAL, {"cat": 0.8, "dog": 0.15, "fox": 0.05}, provider="p",
                               raw={"payload": 1})
    policy = AbstentionPolicy("max_probability", 0.75, labels=("cat", "dog", "fox"),
                              model_id="m-1")
    decision = decide(result, policy, model_id="m-1")
    assert decision.accepted and decision.reason is None and decision.result is result
    assert decision.raw == {"payload": 1} and decision.policy == policy.document()
    assert decide(result, AbstentionPolicy("max_probability", 0.9, labels=policy.labels,
                                           model_id="m-1"), model_id="m-1").abstained

    class Unreadable(ChoiceResult):
        @property
        def probabilities(self):  # type: ignore[override]
            raise AssertionError("read before the schema check")

    untouchable = object.__new__(Unreadable)
    object.__setattr__(untouchable, "question", ANIMAL)
    for other, model in ((AbstentionPolicy("margin", 0.5, labels=("dog", "cat", "fox"),
                                           model_id="m-1"), "m-1"),
                         (policy, "m-2"),
                         (AbstentionPolicy("margin", 0.5, labels=policy.labels, model_id="m-1",
                                           input_field="calibrated_probabilities",
                                           calibrator_id="c"), "m-1")):
        with pytest.raises(AbstentionSchemaError):
            decide(untouchable, other, model_id=model)
    with pytest.raises(Exception, match="ChoiceResult"):
        decide(validate_response(Boolean("b?"), 0.5, provider="p"), policy, model_id="m-1")


def test_the_invalid_response_type_is_the_one_decide_result_reports() -> None:
    out = decide_result(Answers([0.5, 0.5, 0.0]), ANIMAL, [0])
    assert isinstance(out, Err) and isinstance(out.error.cause, InvalidDecisionResponse)
