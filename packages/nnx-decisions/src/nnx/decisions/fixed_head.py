"""FixedHeadProvider (spec §17): a trained classifier as a provider, for exactly what
its head justifies.

* A categorical head answers a Choice whose option ids are its label space, directly
  or through a bijection ``mapping={option_id: label}``; with ``ordinal=True`` it also
  answers a Score whose levels, lowest first, map onto the labels in their order.
* A one-logit head answers one Boolean: the question it was trained for
  (``question=``), matched by digest; any other prompt is UnsupportedCapability.

The head is the model's declared task (its per-batch machinery,
``nnx.extend.task_batch_ops(model)``): ``labels=`` needs a categorical one (a declared
``TaskSpec.categorical`` of that width, or no TaskSpec with a cross-entropy / NLL loss),
``question=`` a one-output binary one (``TaskSpec.multilabel(1)``, or no TaskSpec with
the BCE-with-logits loss). A regression or multilabel head's outputs
are not a distribution over labels, so the provider refuses to be built over them
(UnsupportedCapability, before any forward) rather than softmaxing them into one.

Probabilities are the float64 softmax (sigmoid) of ``NNModel.predict_proba``'s logits,
so they sum to 1 well within the shared tolerance; ``predict_proba`` restores every
submodule's train / eval mode, also when it raises.

A categorical head may serve calibrated probabilities: ``calibrator=`` takes a fitted
``TemperatureCalibrator`` bound to this model and these labels (checked when the
provider is built, :mod:`nnx.decisions.calibrated`), and every Choice / Score answer is
then ``softmax(logits / T)`` with ``result.calibration`` saying by which calibrator. The
argmax is the raw one; ``raw`` keeps the logits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

import nnx
from nnx.decisions.calibrated import HeadCalibration, bind
from nnx.decisions.errors import (
    InvalidDecisionRequest,
    InvalidDecisionResponse,
    ProviderFailure,
    UnsupportedCapability,
)
from nnx.decisions.provider import Capabilities, Limits
from nnx.decisions.questions import Boolean, Choice, Question, Score
from nnx.decisions.result_rows import DecisionResults
from nnx.decisions.results import BooleanResult, ChoiceResult, DecisionResult, ScoreResult
from nnx.decisions.validation import check_rows, validate_response
from nnx.extend import softmax64, task_batch_ops

__all__ = ["FixedHeadProvider"]


class FixedHeadProvider:
    """Typed answers from a trained NNModel's head (module docstring for the rules).

    Give ``labels=`` (the categorical head's label per output column, optionally
    ``mapping=`` and ``ordinal=``) or ``question=`` (the Boolean a one-logit head was
    trained for), not both. ``decide_batch``'s state is one input row ``(1, ...)``.
    With ``labels=``, ``calibrator=`` (a fitted TemperatureCalibrator; ``model_id=`` a
    declared id instead of the weight fingerprint, ``calibration_override=`` a named
    §18 override) serves calibrated distributions.
    """

    def __init__(self, model: nnx.NNModel, *, labels: Sequence[str] | None = None,
                 mapping: Mapping[str, str] | None = None, ordinal: bool = False,
                 question: Boolean | None = None, name: str = "fixed_head",
                 calibrator: Any = None, model_id: str | None = None,
                 calibration_override: str | Sequence[str] | None = None) -> None:
        if not isinstance(model, nnx.NNModel):
            raise InvalidDecisionRequest(f"FixedHeadProvider needs a trained NNModel; got "
                                         f"{type(model).__name__}")
        if (labels is None) == (question is None):
            raise InvalidDecisionRequest("give labels= (a categorical head) or question= "
                                         "(a one-logit Boolean head), exactly one")
        if calibrator is None and (model_id is not None or calibration_override is not None):
            raise InvalidDecisionRequest("model_id= and calibration_override= bind a "
                                         "calibrator=; none was given")
        self.model = model
        self.name = name
        self.question = question
        self.ordinal = bool(ordinal)
        self.labels: tuple[str, ...] = ()
        self.mapping: dict[str, str] | None = None
        self.calibration: HeadCalibration | None = None
        if question is not None:
            if not isinstance(question, Boolean):
                raise InvalidDecisionRequest("question= names the Boolean a one-logit head "
                                             f"was trained for; got {type(question).__name__}")
            if mapping is not None or ordinal:
                raise InvalidDecisionRequest("mapping= and ordinal= apply to a categorical head")
            if calibrator is not None:
                raise InvalidDecisionRequest("calibrator= calibrates a categorical head "
                                             "(temperature scaling, spec §18); a one-logit "
                                             "Boolean head has none")
            _require_head(model, "multilabel", 1, "question= (a one-logit Boolean)")
            self._digest = question.digest()
            return
        self.labels = _labels(labels)
        _require_head(model, "categorical", len(self.labels),
                      f"labels= ({len(self.labels)} classes)")
        if mapping is not None:
            self.mapping = _bijection(mapping, self.labels)
        if calibrator is not None:  # checked now, so nothing is served from a wrong binding
            self.calibration = bind(calibrator, model, self.labels, model_id=model_id,
                                    override=calibration_override)

    def capabilities(self) -> Capabilities:
        if self.question is not None:
            return Capabilities(frozenset({"boolean"}), accepts=self._accepts)
        kinds = {"choice", "score"} if self.ordinal else {"choice"}
        return Capabilities(frozenset(kinds), accepts=self._accepts)

    # -- what the head justifies -------------------------------------------------------

    def _label_of(self, option_id: str) -> str | None:
        return option_id if self.mapping is None else self.mapping.get(option_id)

    def _accepts(self, question: Question) -> str | None:
        if isinstance(question, Boolean):
            if question.digest() != self._digest:
                return ("this one-logit head answers only the Boolean it was trained for "
                        f"({self.question.prompt!r})" if self.question else "")
            return None
        mapped = [self._label_of(i) for i in question.ids]
        if isinstance(question, Score):
            if tuple(mapped) != self.labels:
                return (f"the Score's levels {list(question.ids)} do not map, in order, onto "
                        f"the ordinal head's labels {list(self.labels)}")
            return None
        if None in mapped or sorted(map(str, mapped)) != sorted(self.labels):
            return (f"the Choice's options {list(question.ids)} are not the head's label "
                    f"space {list(self.labels)} (or a bijection onto it)")
        return None

    # -- answering -----------------------------------------------------------------------

    def decide(self, question: Question, inputs: Any) -> DecisionResults:
        """One result per input row, after ``capabilities().check``.

        The whole batch is validated by this call, tensor-wide (``check_rows``), so a
        refusal is raised here as the row-by-row path raised it; each row's typed
        result, equal to what ``validate_response`` gives for that row, is built when
        it is first read (:class:`DecisionResults`).
        """
        self.capabilities().check(question)
        logits = self._logits(inputs)
        if isinstance(question, Boolean):  # check lets a Boolean reach a one-logit head only
            return self._booleans(question, logits)
        return self._distributions_of(question, logits, self._categorical(logits))

    def _booleans(self, question: Boolean, logits: np.ndarray) -> DecisionResults:
        name, z = self.name, logits[:, 0]

        def p_true(n: int) -> float:
            return _sigmoid(float(z[n]))

        def row(n: int) -> DecisionResult:
            return BooleanResult(question, p_true(n), name, {"logits": logits[n].tolist()})

        e = np.exp(-np.abs(z))  # _sigmoid over the column, for the tensor-wide check
        check_rows(question, np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e)), p_true,
                   provider=name)
        return DecisionResults(len(z), row)

    def _distributions_of(self, question: Choice | Score, logits: np.ndarray,
                          p: np.ndarray) -> DecisionResults:
        name, ids = self.name, question.ids
        record = None if self.calibration is None else self.calibration.record
        column = {label: c for c, label in enumerate(self.labels)}
        ordered = p[:, [column[self._label_of(i) or ""] for i in ids]]  # question order
        check_rows(question, ordered, lambda n: list(zip(ids, ordered[n].tolist(), strict=True)),
                   provider=name, calibration=record)
        if isinstance(question, Score):
            score: Score = question

            def row(n: int) -> DecisionResult:
                return ScoreResult(score, tuple(ordered[n].tolist()), name,
                                   {"logits": logits[n].tolist()}, None, None, record)
        else:
            choice: Choice = question

            def row(n: int) -> DecisionResult:
                return ChoiceResult(choice, tuple(ordered[n].tolist()), name,
                                    {"logits": logits[n].tolist()}, None, record)
        return DecisionResults(len(ordered), row)

    def decide_batch(self, questions: Sequence[Question], state: Any, *,
                     limits: Limits | None = None) -> tuple[DecisionResult, ...]:
        """Every question over one input row, from one forward pass."""
        caps = self.capabilities()
        for q in questions:
            caps.check(q, count=len(questions), limits=limits)
        logits = self._logits(state)
        if logits.shape[0] != 1:
            raise InvalidDecisionRequest(f"a decide_batch state is one input row; got "
                                         f"{logits.shape[0]}")
        p = self._distributions(logits)
        return tuple(self._answer(q, logits[0], None if p is None else p[0])
                     for q in questions)

    def _logits(self, inputs: Any) -> np.ndarray:
        # No labels on the spec: a head of the wrong width is this provider's
        # InvalidDecisionResponse below, not the spec's refusal of the request.
        spec = nnx.ProbabilitySpec("bernoulli" if self.question is not None else "categorical")
        try:
            prediction = self.model.predict_proba(inputs, spec)
        except ValueError as exc:  # predict's own refusal of the inputs (before a forward)
            raise InvalidDecisionRequest(f"the model refused the inputs: {exc}") from exc
        except RuntimeError as exc:  # the forward itself failed
            raise ProviderFailure(f"{self.name}: the model's forward failed: {exc}") from exc
        logits = prediction.logits.detach().cpu().double().numpy()
        width = 1 if self.question is not None else len(self.labels)
        if logits.ndim != 2 or logits.shape[1] != width:
            raise InvalidDecisionResponse(f"{self.name}: the head gives logits of shape "
                                          f"{tuple(logits.shape)}; this provider needs "
                                          f"(N, {width})")
        if not np.isfinite(logits).all():
            raise InvalidDecisionResponse(f"{self.name}: the head gave non-finite logits")
        return logits

    def _distributions(self, logits: np.ndarray) -> np.ndarray | None:
        """The categorical rows' raw or calibrated softmax; None for a one-logit head
        (its sigmoid is taken per answer)."""
        return None if self.question is not None else self._categorical(logits)

    def _categorical(self, logits: np.ndarray) -> np.ndarray:
        if self.calibration is not None:
            return self.calibration.probabilities(logits)
        return softmax64(logits)

    def _answer(self, question: Question, logits: np.ndarray,
                p: np.ndarray | None) -> DecisionResult:
        raw = {"logits": logits.tolist()}
        if isinstance(question, Boolean) or p is None:
            return validate_response(question, _sigmoid(float(logits[0])), provider=self.name,
                                     raw=raw)
        by_label = dict(zip(self.labels, p.tolist(), strict=True))
        keyed = [(i, by_label[self._label_of(i) or ""]) for i in question.ids]
        record = None if self.calibration is None else self.calibration.record
        return validate_response(question, keyed, provider=self.name, raw=raw,
                                 calibration=record)


def _sigmoid(z: float) -> float:
    """The float64 sigmoid, stable on both sides."""
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def _require_head(model: nnx.NNModel, kind: str, width: int, asked: str) -> None:
    """Refuse a head whose declared task does not justify ``asked``: reads the task's
    per-batch declarations only (no forward). A model without a TaskSpec has its
    loss's implicit task (spec §6.3) and no declared width; the width is then checked
    on the logits (InvalidDecisionResponse)."""
    ops = task_batch_ops(model)
    has, outputs = ops.metric_kind, ops.num_outputs
    if has != kind or (outputs is not None and outputs != width):
        what = (f"a {has} head" if has else "a head with no label decoding") + (
            f" of {outputs} output(s)" if outputs is not None else "")
        raise UnsupportedCapability(
            f"{asked} needs a {kind} head of {width} output(s); the model has {what} "
            f"({ops.description})")


def _labels(labels: Any) -> tuple[str, ...]:
    if isinstance(labels, (str, bytes)) or not isinstance(labels, Sequence):
        raise InvalidDecisionRequest(f"labels= is a sequence of strings; got {labels!r:.60}")
    out = tuple(labels)
    if len(out) < 2 or not all(isinstance(x, str) and x for x in out):
        raise InvalidDecisionRequest(f"labels= needs 2+ non-empty strings; got {list(out)}")
    if len(set(out)) != len(out):
        raise InvalidDecisionRequest(f"labels= has duplicates: {list(out)}")
    return out


def _bijection(mapping: Mapping[str, str], labels: tuple[str, ...]) -> dict[str, str]:
    if not isinstance(mapping, Mapping):
        raise InvalidDecisionRequest("mapping= maps option ids to the head's labels")
    out = dict(mapping)
    if sorted(out.values()) != sorted(labels) or len(set(out.values())) != len(out):
        raise InvalidDecisionRequest(f"mapping= must be a bijection onto the head's labels "
                                     f"{list(labels)}; its values are {list(out.values())}")
    return out
