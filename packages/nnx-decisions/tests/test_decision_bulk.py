"""Decisions in bulk (issue 38): FixedHeadProvider.decide validates a batch tensor-wide
and builds each row's typed result when it is read, equal to the row-by-row path."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import numpy as np
import pytest
import torch
from _decision_models import classifier, one_logit
from _decisions_data import LABELS, SPLITS, overconfident

from nnx.abstention import AbstentionPolicy
from nnx.abstention import decide as abstain
from nnx.calibration import fit_temperature, model_fingerprint
from nnx.decisions import (
    SUM_TOLERANCE,
    Boolean,
    Choice,
    DecisionResults,
    FixedHeadProvider,
    InvalidDecisionResponse,
    Score,
    decide_result,
    validate_response,
)
from nnx.decisions import fixed_head as fixed_head_module
from nnx.decisions.validation import check_rows
from nnx.extend import Ok

ANIMAL = Choice("Which animal?", [("fox", "A fox"), ("cat", "A cat"), ("dog", "A dog")])
LEVELS = Score("How big?", [("s", "Small"), ("m", "Medium"), ("l", "Large")])
SPAM = Boolean("Is this spam?")


def _rows(count: int, seed: int, scale: float) -> torch.Tensor:
    return torch.randn(count, 4, generator=torch.Generator().manual_seed(seed)) * scale


def _row_by_row(provider: FixedHeadProvider, question: Any, x: torch.Tensor) -> tuple:
    """The per-row path (what decide built before issue 38): one validate_response a row."""
    logits = provider._logits(x)
    p = provider._distributions(logits)
    return tuple(provider._answer(question, logits[n], None if p is None else p[n])
                 for n in range(logits.shape[0]))


def _providers() -> list[tuple[FixedHeadProvider, Any]]:
    model = classifier(seed=4)
    calibrator = fit_temperature(*overconfident(300, seed=7), LABELS,
                                 model_id=model_fingerprint(model), **SPLITS).require()
    mapped = Choice("Which one?", [("b", "B"), ("a", "A"), ("c", "C")])
    return [
        (FixedHeadProvider(model, labels=LABELS), ANIMAL),
        (FixedHeadProvider(model, labels=LABELS,
                           mapping={"a": "cat", "b": "dog", "c": "fox"}), mapped),
        (FixedHeadProvider(model, labels=("s", "m", "l"), ordinal=True), LEVELS),
        (FixedHeadProvider(model, labels=LABELS, calibrator=calibrator), ANIMAL),
        (FixedHeadProvider(one_logit(seed=5), question=SPAM), SPAM),
    ]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("scale", [1.0, 60.0])  # 60: saturated rows, exact 0s and 1s
def test_bulk_decide_equals_the_row_by_row_path_on_random_inputs(seed, scale) -> None:
    x = _rows(40, seed, scale)
    for provider, question in _providers():
        expected = _row_by_row(provider, question, x)
        results = provider.decide(question, x)
        assert isinstance(results, DecisionResults) and len(results) == 40
        assert results == expected and expected == results
        for got, want in zip(results, expected, strict=True):
            assert type(got) is type(want) and got == want
            assert got.raw == want.raw and got.calibration == want.calibration


@pytest.mark.parametrize("kind", ["max_probability", "margin"])
@pytest.mark.parametrize("quantile", [0.25, 0.75])
def test_abstentions_over_bulk_results_equal_the_row_by_row_ones(kind, quantile) -> None:
    model = classifier(seed=4)
    provider = FixedHeadProvider(model, labels=LABELS)
    question = Choice("Which?", [(label, label.upper()) for label in LABELS])
    x = _rows(60, 9, 3.0)
    rows = _row_by_row(provider, question, x)
    top2 = np.sort(np.array([r.probabilities for r in rows]), axis=1)[:, ::-1][:, :2]
    scores = top2[:, 0] if kind == "max_probability" else top2[:, 0] - top2[:, 1]
    threshold = float(np.quantile(scores, quantile))  # some rows abstained, some accepted
    policy = AbstentionPolicy(kind, threshold, labels=LABELS, model_id="m")
    expected = [abstain(r, policy, model_id="m") for r in rows]
    out = decide_result(provider, question, x, policy=policy, model_id="m")
    assert isinstance(out, Ok) and list(out.value) == expected
    assert {d.accepted for d in expected} == {True, False}  # both outcomes are compared


def test_decide_result_keeps_the_rows_lazy() -> None:
    provider = FixedHeadProvider(classifier(), labels=LABELS)
    out = decide_result(provider, ANIMAL, _rows(5, 0, 1.0))
    assert isinstance(out, Ok) and isinstance(out.value, DecisionResults)
    assert out.value == _row_by_row(provider, ANIMAL, _rows(5, 0, 1.0))


def test_a_row_is_built_when_first_read_and_kept(monkeypatch) -> None:
    built: list[Any] = []
    real = fixed_head_module.ChoiceResult

    def counting(*args: Any) -> Any:
        built.append(args)
        return real(*args)

    monkeypatch.setattr(fixed_head_module, "ChoiceResult", counting)
    results = FixedHeadProvider(classifier(), labels=LABELS).decide(ANIMAL, _rows(1000, 0, 1.0))
    assert built == []  # validated, nothing built
    third = results[2]
    assert results[2] is third and results[-998] is third and len(built) == 1
    tail = results[997:]
    assert len(tail) == 3 and len(built) == 1  # a slice is a view
    assert tail[0] is results[997] and len(built) == 2
    assert list(results[:3]) == [results[0], results[1], third] and len(built) == 4


def test_decision_results_behave_as_the_tuple_of_their_rows() -> None:
    provider = FixedHeadProvider(classifier(), labels=LABELS)
    x = _rows(6, 3, 2.0)
    results, rows = provider.decide(ANIMAL, x), _row_by_row(provider, ANIMAL, x)
    assert len(results) == 6 and bool(results) and not provider.decide(ANIMAL, x[:0])
    assert results[-1] == rows[-1] and results[np.int64(1)] == rows[1]
    assert results[1:5:2] == rows[1:5:2] and results[::-1] == rows[::-1]
    assert list(reversed(results)) == list(reversed(rows))
    assert rows[3] in results and results.count(rows[3]) == 1 and results.index(rows[3]) == 3
    assert results == provider.decide(ANIMAL, x) and results != rows[:5]
    assert results != list(rows) and results != (*rows[:5], rows[0])
    # the tuple's + itself is under test here
    assert results + (1,) == rows + (1,) and (1,) + results == (1,) + rows  # noqa: RUF005
    assert results * 2 == rows * 2 and 2 * results == 2 * rows
    assert results[:0] < results and results >= rows and results[:1] <= rows
    assert repr(results) == repr(rows)
    assert pickle.loads(pickle.dumps(results)) == rows and copy.deepcopy(results) == rows
    with pytest.raises(IndexError):
        results[6]
    with pytest.raises(TypeError, match="integers or slices"):
        results["0"]  # type: ignore[call-overload]
    with pytest.raises(TypeError):  # a row holds its raw dict: unhashable, as the tuple
        hash(results)
    first, *_ = results
    assert first is results[0]


def _bad(monkeypatch, provider: FixedHeadProvider, row: int, values: list[float]) -> None:
    real = provider._categorical  # what both paths take their distributions from

    def categorical(logits: np.ndarray) -> np.ndarray:
        p = real(logits)
        p[row] = values
        return p

    monkeypatch.setattr(provider, "_categorical", categorical)


@pytest.mark.parametrize("values", [[0.2, 0.3, 0.6], [np.nan, 0.5, 0.5],
                                    [-0.1, 0.6, 0.5], [1.5, -0.25, -0.25]])
def test_a_refused_row_is_refused_by_decide_as_row_by_row(monkeypatch, values) -> None:
    provider = FixedHeadProvider(classifier(), labels=LABELS)
    x = _rows(50, 0, 1.0)
    _bad(monkeypatch, provider, 17, values)
    with pytest.raises(InvalidDecisionResponse) as per_row:
        _row_by_row(provider, ANIMAL, x)
    built: list[Any] = []
    monkeypatch.setattr(fixed_head_module, "ChoiceResult", lambda *a: built.append(a))
    with pytest.raises(InvalidDecisionResponse) as bulk:
        provider.decide(ANIMAL, x)
    assert str(bulk.value) == str(per_row.value) and built == []


def test_sums_at_the_tolerance_are_decided_as_fsum_decides_them() -> None:
    # Rows whose sum lies a few ulps either side of 1 +- SUM_TOLERANCE: NumPy's sum alone
    # could land on the other side; each row is refused exactly when validate_response
    # refuses it.
    rng = np.random.default_rng(0)
    question = Choice("Which?", [(str(i), f"option {i}") for i in range(7)])
    outcomes = set()
    for _ in range(500):
        row = rng.dirichlet(np.ones(7))
        sign = rng.choice([-1.0, 1.0])
        row[rng.integers(7)] += sign * SUM_TOLERANCE * (1 + rng.integers(-4, 5) * 2e-10)
        rows = np.vstack([np.full(7, 1 / 7), row])  # row 0 goes one by one: row 1 in bulk

        def output(n: int, rows: np.ndarray = rows) -> list[tuple[str, float]]:
            return list(zip(question.ids, rows[n].tolist(), strict=True))

        try:
            validate_response(question, output(1), provider="p")
            refused = None
        except InvalidDecisionResponse as exc:
            refused = str(exc)
        outcomes.add(refused is None)
        if refused is None:
            check_rows(question, rows, output, provider="p")
        else:
            with pytest.raises(InvalidDecisionResponse) as bulk:
                check_rows(question, rows, output, provider="p")
            assert str(bulk.value) == refused
    assert outcomes == {True, False}


def test_a_question_wide_refusal_is_the_row_by_row_one() -> None:
    # calibration= on a Boolean is refused by validate_response for any row: check_rows
    # sends its first row through it, so a batch is refused the same way.
    values = np.array([0.25, 0.75])
    with pytest.raises(InvalidDecisionResponse, match="calibration records"):
        check_rows(SPAM, values, lambda n: float(values[n]), provider="p",
                   calibration={"field": "calibrated_probabilities"})
    bad = np.array([0.25, np.nan, 1.5])
    with pytest.raises(InvalidDecisionResponse, match="p_true: probability nan"):
        check_rows(SPAM, bad, lambda n: float(bad[n]), provider="p")
    check_rows(SPAM, bad[:0], lambda n: float(bad[n]), provider="p")  # no rows: nothing
