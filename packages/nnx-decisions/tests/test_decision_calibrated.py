"""Calibrated typed decisions (spec §17-§19): a FixedHeadProvider serving a fitted
temperature bound to its model, each answer recording its calibrator, and ``decide``
applying a policy tuned on that calibrator's view."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from _decision_models import classifier, one_logit
from _decisions_data import LABELS, SPLITS, overconfident

import nnx
from nnx.abstention import (
    AbstentionPolicy,
    AbstentionSchemaError,
    SelectiveDecision,
    decide,
    select_threshold,
)
from nnx.calibration import (
    CalibrationError,
    CalibrationMismatchError,
    TemperatureCalibrator,
    fit_temperature,
    model_fingerprint,
)
from nnx.decisions import (
    Boolean,
    Choice,
    FixedHeadProvider,
    InvalidDecisionRequest,
    Score,
    decide_result,
)
from nnx.extend import Ok, softmax64

ANIMAL = Choice("Which animal?", [("cat", "A cat"), ("dog", "A dog"), ("fox", "A fox")])
X = torch.randn(6, 4, generator=torch.Generator().manual_seed(3))


def _calibrator(model_id: str, labels: tuple = LABELS) -> TemperatureCalibrator:
    z, t = overconfident(300, seed=7)  # over-confident: the fitted T is well above 1
    calibrator = fit_temperature(z, t, labels, model_id=model_id, **SPLITS).require()
    assert calibrator.temperature > 1.5
    return calibrator


def _logits(model: nnx.NNModel, x: torch.Tensor = X) -> np.ndarray:
    spec = nnx.ProbabilitySpec("categorical")
    return model.predict_proba(x, spec).logits.double().numpy()


def test_a_bound_calibrator_serves_calibrated_distributions_recorded_on_each_answer() -> None:
    model = classifier()
    fingerprint = model_fingerprint(model)
    calibrator = _calibrator(fingerprint)
    provider = FixedHeadProvider(model, labels=LABELS, calibrator=calibrator, ordinal=True)
    assert provider.calibration is not None and provider.calibration.model_id == fingerprint
    results = provider.decide(ANIMAL, X)
    z = _logits(model)
    served = calibrator.transform(z, labels=LABELS, model_id=fingerprint)
    raw = FixedHeadProvider(model, labels=LABELS).decide(ANIMAL, X)
    for row, result in enumerate(results):
        assert result.probabilities == tuple(served.calibrated_probabilities[row].tolist())
        assert result.probabilities != tuple(softmax64(z[row:row + 1])[0].tolist())
        assert result.choice == raw[row].choice            # the argmax never changes
        assert result.raw == {"logits": z[row].tolist()}   # raw keeps the logits
        assert dict(result.calibration) == {
            "field": "calibrated_probabilities", "calibrator_id": calibrator.calibrator_id,
            "temperature": calibrator.temperature, "model_id": fingerprint,
            "calibrator_model_id": fingerprint, "override": None}
        assert raw[row].calibration is None
    level = Score("How big?", [("cat", "S"), ("dog", "M"), ("fox", "L")])
    batch = provider.decide_batch([ANIMAL, level], X[:1])
    one = calibrator.transform(_logits(model, X[:1]), labels=LABELS, model_id=fingerprint)
    assert batch[1].probabilities == batch[0].probabilities == tuple(
        one.calibrated_probabilities[0].tolist())
    assert batch[1].calibration == results[0].calibration


def _untouched(model: nnx.NNModel) -> tuple[dict, bool, list[int]]:
    calls: list[int] = []
    forward = model.predict_proba

    def counting(*args, **kwargs):  # pragma: no cover - a refusal must come first
        calls.append(1)
        return forward(*args, **kwargs)

    model.predict_proba = counting  # type: ignore[method-assign]
    state = {k: v.clone() for k, v in model.net.state_dict().items()}
    return state, model.net.training, calls


@pytest.mark.parametrize(("bound", "kwargs", "error", "match"), [
    ("other-model", {}, CalibrationMismatchError, "model_id"),
    ("fingerprint", {"labels": ("dog", "cat", "fox")}, CalibrationMismatchError,
     "label_order"),
    ("fingerprint", {"labels": ("cat", "dog")}, CalibrationMismatchError, "class count"),
    ("run-1:BEST", {}, CalibrationMismatchError, "model_id"),  # declared, not declared here
    ("fingerprint", {"model_id": "sha256:" + "0" * 64}, InvalidDecisionRequest,
     "not this model's"),
    ("fingerprint", {"calibration_override": "everything"}, CalibrationError, "override"),
], ids=["another-model", "reordered-labels", "other-class-count", "declared-id-undeclared",
        "false-fingerprint", "unknown-override"])
def test_a_calibrator_bound_elsewhere_is_refused_when_the_provider_is_built(
        bound, kwargs, error, match) -> None:
    model = classifier()
    other = classifier(seed=1)
    model_id = {"fingerprint": model_fingerprint(model),
                "other-model": model_fingerprint(other)}.get(bound, bound)
    calibrator = _calibrator(model_id)
    labels = kwargs.pop("labels", LABELS)
    head = classifier(2) if len(labels) == 2 else model
    state, training, calls = _untouched(head)
    with pytest.raises(error, match=match):
        FixedHeadProvider(head, labels=labels, calibrator=calibrator, **kwargs)
    assert calls == [] and head.net.training == training
    assert all(torch.equal(v, state[k]) for k, v in head.net.state_dict().items())


def test_a_named_override_or_a_declared_id_accepts_the_binding_and_is_recorded() -> None:
    model = classifier()
    declared = FixedHeadProvider(model, labels=LABELS, calibrator=_calibrator("run-1:BEST"),
                                 model_id="run-1:BEST")
    assert declared.decide(ANIMAL, X[:1])[0].calibration["model_id"] == "run-1:BEST"
    swapped = _calibrator(model_fingerprint(model), labels=("dog", "cat", "fox"))
    provider = FixedHeadProvider(model, labels=LABELS, calibrator=swapped,
                                 calibration_override="label_order")
    result = provider.decide(ANIMAL, X[:1])[0]
    assert result.calibration["override"] == {
        "accepted": ["label_order"],
        "mismatches": [{"field": "labels", "expected": ["dog", "cat", "fox"],
                        "actual": list(LABELS)}]}
    policy = AbstentionPolicy("max_probability", 0.0, labels=LABELS,
                              model_id=model_fingerprint(model),
                              input_field="calibrated_probabilities",
                              calibrator_id=swapped.calibrator_id)
    verdict = decide(result, policy, model_id=model_fingerprint(model))
    assert verdict.calibration_override == result.calibration["override"]


@pytest.mark.parametrize(("build", "match"), [
    (lambda m, c: FixedHeadProvider(one_logit(), question=Boolean("b?"), calibrator=c),
     "categorical head"),
    (lambda m, c: FixedHeadProvider(m, labels=LABELS, model_id="run-1:BEST"), "calibrator="),
    (lambda m, c: FixedHeadProvider(m, labels=LABELS, calibrator=fit_temperature(
        *overconfident(300, seed=7), LABELS, model_id="x", **SPLITS)), r"\.require\(\)"),
    (lambda m, c: FixedHeadProvider(m, labels=LABELS, calibrator=c.document()),
     "TemperatureCalibrator"),
])
def test_what_is_not_a_bound_temperature_is_an_invalid_request(build, match) -> None:
    model = classifier()
    with pytest.raises(InvalidDecisionRequest, match=match):
        build(model, _calibrator(model_fingerprint(model)))


def _tuned(model: nnx.NNModel, calibrator: TemperatureCalibrator) -> AbstentionPolicy:
    """A policy tuned on the calibrator's view of a validation split, as §19 tunes it."""
    fingerprint = model_fingerprint(model)
    val = torch.randn(40, 4, generator=torch.Generator().manual_seed(5))
    view = calibrator.transform(_logits(model, val), labels=LABELS, model_id=fingerprint)
    targets = view.class_indices.copy()
    targets[::4] = (targets[::4] + 1) % 3  # a quarter wrong, so risk varies with the score
    selection = select_threshold(view, targets, kind="max_probability", min_coverage=0.5,
                                 split_id="val", test_split_id="test",
                                 input_field="calibrated_probabilities")
    return selection.require()


def test_decide_accepts_a_policy_tuned_on_the_same_calibrators_view() -> None:
    model = classifier()
    fingerprint = model_fingerprint(model)
    calibrator = _calibrator(fingerprint)
    policy = _tuned(model, calibrator)
    assert policy.input_field == "calibrated_probabilities"
    provider = FixedHeadProvider(model, labels=LABELS, calibrator=calibrator)
    results = provider.decide(ANIMAL, X)
    verdicts = [decide(r, policy, model_id=fingerprint) for r in results]
    for result, verdict in zip(results, verdicts, strict=True):
        assert verdict.result is result and verdict.score == max(result.probabilities)
        assert verdict.accepted == (verdict.score >= policy.threshold)
    # Between a row's raw and calibrated top probability (T > 1 lowers it), a calibrated
    # policy abstains where a raw one accepts: the calibrated scores decide.
    raw = FixedHeadProvider(model, labels=LABELS).decide(ANIMAL, X[:1])[0]
    between = (max(raw.probabilities) + max(results[0].probabilities)) / 2
    on_raw = AbstentionPolicy("max_probability", between, labels=LABELS, model_id=fingerprint)
    on_calibrated = AbstentionPolicy("max_probability", between, labels=LABELS,
                                     model_id=fingerprint, input_field=policy.input_field,
                                     calibrator_id=calibrator.calibrator_id)
    assert decide(raw, on_raw, model_id=fingerprint).accepted
    assert decide(results[0], on_calibrated, model_id=fingerprint).abstained
    out = decide_result(provider, ANIMAL, X, policy=policy, model_id=fingerprint)
    assert isinstance(out, Ok) and all(isinstance(v, SelectiveDecision) for v in out.value)
    assert [v.accepted for v in out.value] == [v.accepted for v in verdicts]


def test_decide_refuses_a_field_or_calibrator_the_answer_does_not_hold() -> None:
    model = classifier()
    fingerprint = model_fingerprint(model)
    calibrator = _calibrator(fingerprint)
    policy = _tuned(model, calibrator)
    calibrated = FixedHeadProvider(model, labels=LABELS, calibrator=calibrator).decide(
        ANIMAL, X[:1])[0]
    raw = FixedHeadProvider(model, labels=LABELS).decide(ANIMAL, X[:1])[0]
    raw_policy = AbstentionPolicy("max_probability", 0.5, labels=LABELS, model_id=fingerprint)
    other = AbstentionPolicy("max_probability", 0.5, labels=LABELS, model_id=fingerprint,
                             input_field="calibrated_probabilities", calibrator_id="0" * 64)
    declared = FixedHeadProvider(model, labels=LABELS, calibrator=calibrator,
                                 calibration_override="model_id", model_id="run-1:BEST")
    for answer, chosen, model_id, match in (
            (raw, policy, fingerprint, "input_field"),          # calibrated policy, raw answer
            (calibrated, raw_policy, fingerprint, "input_field"),  # raw policy, calibrated one
            (calibrated, other, fingerprint, "calibrator_id"),
            (declared.decide(ANIMAL, X[:1])[0], policy, fingerprint, "calibrated for")):
        with pytest.raises(AbstentionSchemaError, match=match):
            decide(answer, chosen, model_id=model_id)
