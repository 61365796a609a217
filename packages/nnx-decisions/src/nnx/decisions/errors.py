"""The named errors of nnx.decisions (spec §17).

A request that cannot be asked (:class:`InvalidDecisionRequest`), a question a
provider cannot answer (:class:`UnsupportedCapability`, raised before any model
call), an answer that does not fit its question (:class:`InvalidDecisionResponse`,
never repaired) and a provider that could not answer (:class:`ProviderFailure`, with
the hosted :class:`JevError`) are told apart, so a caller (and the §27 wrappers)
can branch on which happened.
"""

from __future__ import annotations

__all__ = ["DecisionError", "InvalidDecisionRequest", "InvalidDecisionResponse", "JevError",
           "ProviderFailure", "UnsupportedCapability"]


class DecisionError(Exception):
    """Base of the typed decision errors."""


class InvalidDecisionRequest(DecisionError, ValueError):
    """A malformed question, state or request (duplicate job ids included): nothing
    was sent to a provider."""


class UnsupportedCapability(DecisionError):
    """The provider cannot answer this question (kind, label space, batch size, token
    cap); raised by ``capabilities().check(...)`` before any model call."""


class InvalidDecisionResponse(DecisionError, ValueError):
    """The provider's answer does not fit the question: a missing, duplicate, unknown
    or unlabeled id, or a malformed distribution. Refused, never renormalized."""


class ProviderFailure(DecisionError):
    """The provider could not answer (a model that raised, a hosted service error)."""


class JevError(ProviderFailure):
    """A failure of the hosted Jev service, after the SDK's own retries.

    ``request_id`` is the service's request id (``None`` when no response came back,
    a connection error say), ``status`` the HTTP status when there was one."""

    def __init__(self, message: str, *, request_id: str | None = None,
                 status: int | None = None) -> None:
        super().__init__(message if request_id is None else
                         f"{message} (request_id={request_id})")
        self.request_id = request_id
        self.status = status
