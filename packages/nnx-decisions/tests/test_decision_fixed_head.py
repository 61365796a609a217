"""FixedHeadProvider (spec §17): only what a head justifies, typed errors, modes kept."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _decision_models import classifier, one_logit

import nnx
from nnx.decisions import (
    Boolean,
    BooleanResult,
    Choice,
    ChoiceResult,
    FixedHeadProvider,
    InvalidDecisionRequest,
    InvalidDecisionResponse,
    ProviderFailure,
    Score,
    ScoreResult,
    UnsupportedCapability,
)
from nnx.extend import softmax64

LABELS = ("cat", "dog", "fox")
ANIMAL = Choice("Which animal?", [("fox", "A fox"), ("cat", "A cat"), ("dog", "A dog")])
X = torch.randn(5, 4, generator=torch.Generator().manual_seed(1))


class Forbidden:
    """A model stand-in that fails the test if anything calls it."""

    calls = 0

    def predict_proba(self, *args, **kwargs):  # pragma: no cover - must never run
        Forbidden.calls += 1
        raise AssertionError("the model was called")


def _expected(model: nnx.NNModel, x: torch.Tensor = X) -> np.ndarray:
    logits = model.predict_proba(x, nnx.ProbabilitySpec("categorical")).logits
    return softmax64(logits.double().numpy())


def test_choice_over_the_exact_label_space_in_question_order() -> None:
    model = classifier()
    results = FixedHeadProvider(model, labels=LABELS).decide(ANIMAL, X)
    expected = _expected(model)
    assert len(results) == 5 and all(isinstance(r, ChoiceResult) for r in results)
    for row, result in zip(expected, results, strict=True):
        assert result.ids == ("fox", "cat", "dog")
        assert result.distribution == {"cat": row[0], "dog": row[1], "fox": row[2]}
        assert result.raw["logits"] and result.provider == "fixed_head"


def test_choice_through_a_bijection_onto_the_labels() -> None:
    model = classifier()
    other = Choice("Which?", [("a", "first"), ("b", "second"), ("c", "third")])
    provider = FixedHeadProvider(model, labels=LABELS,
                                 mapping={"a": "dog", "b": "fox", "c": "cat"})
    result = provider.decide(other, X[:1])[0]
    row = _expected(model, X[:1])[0]
    assert result.probabilities == (row[1], row[2], row[0])
    with pytest.raises(InvalidDecisionRequest, match="bijection"):
        FixedHeadProvider(model, labels=LABELS, mapping={"a": "dog", "b": "dog", "c": "cat"})


@pytest.mark.parametrize("question", [
    Choice("Which?", [("cat", "A cat"), ("dog", "A dog")]),                     # a subset
    Choice("Which?", [("cat", "A"), ("dog", "B"), ("fox", "C"), ("owl", "D")]),  # a superset
    Score("How much?", [("cat", "A"), ("dog", "B"), ("fox", "C")]),             # not ordinal
    Boolean("Is it a cat?"),                                                     # no one-logit head
])
def test_what_the_head_does_not_justify_is_refused_before_any_model_call(question) -> None:
    provider = FixedHeadProvider(classifier(), labels=LABELS)
    provider.model = Forbidden()  # type: ignore[assignment]
    with pytest.raises(UnsupportedCapability):
        provider.decide(question, X)
    with pytest.raises(UnsupportedCapability):
        provider.decide_batch([question], X[:1])
    assert Forbidden.calls == 0


def test_score_from_an_ordinal_head_maps_levels_in_order() -> None:
    model = classifier()
    levels = Score("How urgent?", [("low", "Can wait"), ("mid", "Soon"), ("high", "Now")])
    provider = FixedHeadProvider(model, labels=("l0", "l1", "l2"), ordinal=True,
                                 mapping={"low": "l0", "mid": "l1", "high": "l2"})
    result = provider.decide(levels, X[:1])[0]
    row = _expected(model, X[:1])[0]
    assert isinstance(result, ScoreResult) and result.probabilities == tuple(row)
    assert result.expected_index == pytest.approx(row[1] + 2 * row[2])
    assert result.vendor_score is None
    shuffled = Score("How urgent?", [("mid", "Soon"), ("low", "Can wait"), ("high", "Now")])
    with pytest.raises(UnsupportedCapability, match="in order"):
        provider.decide(shuffled, X[:1])


def test_boolean_only_for_the_question_the_head_was_trained_for() -> None:
    model = one_logit()
    trained = Boolean("Is this spam?")
    provider = FixedHeadProvider(model, question=trained)
    results = provider.decide(Boolean("Is this spam?"), X)
    logits = model.predict_proba(X, nnx.ProbabilitySpec("bernoulli")).logits.double()
    assert all(isinstance(r, BooleanResult) for r in results)
    np.testing.assert_allclose([r.p_true for r in results], torch.sigmoid(logits)[:, 0].numpy(),
                               rtol=0, atol=1e-15)
    with pytest.raises(UnsupportedCapability, match="trained for"):
        provider.decide(Boolean("Is this a scam?"), X)
    with pytest.raises(UnsupportedCapability):
        provider.decide(ANIMAL, X)


def test_a_head_of_the_wrong_width_is_an_invalid_response() -> None:
    with pytest.raises(InvalidDecisionResponse, match="shape"):
        FixedHeadProvider(classifier(outputs=4), labels=LABELS).decide(ANIMAL, X)
    with pytest.raises(InvalidDecisionResponse, match="shape"):
        FixedHeadProvider(classifier(2, loss=nnx.Losses.BINARY_CROSS_ENTROPY),
                          question=Boolean("Spam?")).decide(Boolean("Spam?"), X)


def test_inputs_refused_and_forward_failures_are_typed() -> None:
    provider = FixedHeadProvider(classifier(), labels=LABELS)
    with pytest.raises(InvalidDecisionRequest, match="one input row"):
        provider.decide_batch([ANIMAL], X)
    with pytest.raises(InvalidDecisionRequest, match="refused the inputs"):
        provider.decide(ANIMAL, torch.randn(4))  # one unbatched row
    with pytest.raises(InvalidDecisionRequest, match="4 features"):
        provider.decide(ANIMAL, torch.randn(3, 7))  # the wrong width for the net
    _break(provider.model)
    with pytest.raises(ProviderFailure, match="forward failed"):
        provider.decide(ANIMAL, X)


def _unforwardable(model: nnx.NNModel) -> nnx.NNModel:
    """``model`` with a forward and a predict_proba that fail the test if called."""
    def called(*args, **kwargs):  # pragma: no cover - must never run
        raise AssertionError("the model was called")
    model.net.forward = called  # type: ignore[method-assign]
    model.predict_proba = called  # type: ignore[method-assign]
    return model


BCE, MSE = nnx.Losses.BINARY_CROSS_ENTROPY, nnx.Losses.MEAN_SQUARED_ERROR


@pytest.mark.parametrize("model", [
    lambda: classifier(3, loss=BCE, task=nnx.TaskSpec.multilabel(3)),   # three yes / no labels
    lambda: classifier(3, loss=MSE, task=nnx.TaskSpec.regression(3)),   # three numbers
    lambda: classifier(3, loss=BCE),                                    # implicit multilabel
    lambda: classifier(3, loss=MSE),                                    # implicit loss-only
    lambda: classifier(4, task=nnx.TaskSpec.categorical(4)),            # another label count
], ids=["multilabel", "regression", "bce-no-task", "mse-no-task", "categorical-4"])
def test_labels_need_a_categorical_head_of_that_width_refused_before_any_forward(model) -> None:
    with pytest.raises(UnsupportedCapability, match="categorical head of 3"):
        FixedHeadProvider(_unforwardable(model()), labels=LABELS)


@pytest.mark.parametrize("model", [
    lambda: classifier(1, loss=MSE, task=nnx.TaskSpec.regression(1)),   # one number
    lambda: classifier(1),                                              # a one-logit softmax
    lambda: classifier(2, task=nnx.TaskSpec.categorical(2)),            # two classes
    lambda: classifier(2, loss=BCE, task=nnx.TaskSpec.multilabel(2)),   # two yes / no labels
], ids=["regression-1", "cross-entropy-1", "categorical-2", "multilabel-2"])
def test_a_boolean_needs_a_one_output_binary_head_refused_before_any_forward(model) -> None:
    with pytest.raises(UnsupportedCapability, match="multilabel head of 1"):
        FixedHeadProvider(_unforwardable(model()), question=Boolean("Is this spam?"))


def test_declared_binary_and_categorical_tasks_are_answered() -> None:
    declared = classifier(1, loss=BCE, task=nnx.TaskSpec.multilabel(1))
    spam = Boolean("Is this spam?")
    (result,) = FixedHeadProvider(declared, question=spam).decide(spam, X[:1])
    assert isinstance(result, BooleanResult)
    categorical = classifier(3, task=nnx.TaskSpec.categorical(3))
    (choice,) = FixedHeadProvider(categorical, labels=LABELS).decide(ANIMAL, X[:1])
    assert choice.distribution["cat"] == _expected(categorical, X[:1])[0][0]


def _break(model: nnx.NNModel) -> None:
    def fail(x: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("device lost")
    model.net.forward = fail  # type: ignore[method-assign]


def test_construction_refusals() -> None:
    model = classifier()
    with pytest.raises(InvalidDecisionRequest, match="exactly one"):
        FixedHeadProvider(model)
    with pytest.raises(InvalidDecisionRequest, match="exactly one"):
        FixedHeadProvider(model, labels=LABELS, question=Boolean("q"))
    with pytest.raises(InvalidDecisionRequest, match="NNModel"):
        FixedHeadProvider(object(), labels=LABELS)  # type: ignore[arg-type]
    with pytest.raises(InvalidDecisionRequest, match="duplicates"):
        FixedHeadProvider(model, labels=("cat", "cat"))


def test_the_models_mixed_modes_are_restored() -> None:
    model = classifier()
    model.net.train()
    modules = list(model.net.modules())
    modules[1].eval()  # a mixed-mode tree
    before = [m.training for m in modules]
    provider = FixedHeadProvider(model, labels=LABELS)
    provider.decide(ANIMAL, X)
    provider.decide_batch([ANIMAL, ANIMAL], X[:1])
    assert [m.training for m in modules] == before
    _break(model)
    with pytest.raises(ProviderFailure):
        provider.decide(ANIMAL, X)
    assert [m.training for m in modules] == before


def test_decide_batch_answers_every_question_from_one_forward() -> None:
    model = classifier()
    provider = FixedHeadProvider(model, labels=LABELS)
    calls = []
    original = model.predict_proba
    model.predict_proba = lambda *a, **k: calls.append(1) or original(*a, **k)  # type: ignore[method-assign]
    other = Choice("Again?", [("dog", "A dog"), ("cat", "A cat"), ("fox", "A fox")])
    first, second = provider.decide_batch([ANIMAL, other], X[:1])
    assert len(calls) == 1
    assert first.distribution == second.distribution
