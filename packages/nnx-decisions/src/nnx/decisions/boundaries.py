"""The §27 decision wrappers: errors as values at the edge of a program.

Each converts exactly the exceptions it declares into
``Err(BoundaryError(code, where, context, cause))``; anything else (a provider's own
RuntimeError, a KeyboardInterrupt, a cancellation) propagates. The exception-style
APIs (``question_from_state``, ``provider.decide``) are unchanged.

* :func:`validate_decision_request_result`: plain data -> the typed question, so an
  invalid request never reaches a provider (``invalid_decision_request``);
* :func:`decide_result`: ``Ok(results)`` (a FixedHeadProvider's lazy
  :class:`DecisionResults` stays lazy) or, with a ``policy``, ``Ok`` of the
  ``SelectiveDecision``\\ s its ``decide`` gives (an abstention is a success);
  ``unsupported_capability``, ``invalid_decision_response`` and ``provider_failure``
  are told apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from nnx.decisions.errors import (
    InvalidDecisionRequest,
    InvalidDecisionResponse,
    ProviderFailure,
    UnsupportedCapability,
)
from nnx.decisions.provider import DecisionProvider
from nnx.decisions.questions import Question, question_from_state
from nnx.decisions.result_rows import DecisionResults
from nnx.extend import BoundaryError, Err, Ok, Result

__all__ = ["CODES", "SelectionPolicy", "decide_result", "validate_decision_request_result"]

#: The BoundaryError codes, by the exception each converts (most specific first).
CODES: tuple[tuple[type[Exception], str], ...] = (
    (InvalidDecisionRequest, "invalid_decision_request"),
    (UnsupportedCapability, "unsupported_capability"),
    (InvalidDecisionResponse, "invalid_decision_response"),
    (ProviderFailure, "provider_failure"),
)


class SelectionPolicy(Protocol):
    """What ``decide_result(policy=...)`` needs: an AbstentionPolicy (nnx.abstention)."""

    def decide(self, result: Any, *, model_id: str) -> Any: ...


def _code(exc: Exception) -> str:
    return next(code for kind, code in CODES if isinstance(exc, kind))


def validate_decision_request_result(data: Any) -> Result[Question, BoundaryError]:
    """``Ok(question)`` from plain data, or ``Err`` with code ``invalid_decision_request``."""
    try:
        return Ok(question_from_state(data))
    except InvalidDecisionRequest as exc:
        return Err(BoundaryError("invalid_decision_request", "validate_decision_request_result",
                                 {"data": data}, exc))


def decide_result(provider: DecisionProvider, question: Question, inputs: Any, *,
                  policy: SelectionPolicy | None = None,
                  model_id: str | None = None) -> Result[Sequence[Any], BoundaryError]:
    """``provider.decide(question, inputs)`` as a value (module docstring).

    With ``policy`` (and the ``model_id`` it was tuned for), each Choice result goes
    through ``policy.decide`` and the Ok holds SelectiveDecisions.
    """
    context = {"provider": getattr(provider, "name", type(provider).__name__),
               "question": question.digest() if hasattr(question, "digest") else None}
    try:
        provider.capabilities().check(question)
        answered = provider.decide(question, inputs)
        # A DecisionResults is immutable and already validated: kept as it is, its rows
        # are built when read (a tuple() here would build every row).
        results = answered if isinstance(answered, DecisionResults) else tuple(answered)
    except (InvalidDecisionRequest, UnsupportedCapability, InvalidDecisionResponse,
            ProviderFailure) as exc:
        return Err(BoundaryError(_code(exc), "decide_result", context, exc))
    if policy is None:
        return Ok(results)
    if model_id is None:
        raise TypeError("decide_result(policy=...) needs the model_id the policy was tuned for")
    return Ok(tuple(policy.decide(r, model_id=model_id) for r in results))
