"""DecisionProvider and Capabilities (spec §17).

A provider answers typed questions. ``decide(question, inputs)`` gives one result per
input; ``decide_batch(questions, state)`` answers several questions over one state in
ONE provider call (what a DecisionJob batches). ``capabilities().check(...)`` raises
UnsupportedCapability before any model call, so a question a provider cannot answer
never reaches it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from nnx.decisions.errors import InvalidDecisionRequest, UnsupportedCapability
from nnx.decisions.questions import Boolean, Choice, Question, Score
from nnx.decisions.results import DecisionResult
from nnx.extend import check_optional_count

__all__ = ["Capabilities", "DecisionProvider", "Limits"]

_KINDS = ("choice", "boolean", "score")


def kind_of(question: Any) -> str:
    if not isinstance(question, (Choice, Boolean, Score)):
        raise InvalidDecisionRequest(f"a question is a Choice, Boolean or Score; got "
                                     f"{type(question).__name__}")
    return question.KIND


@dataclass(frozen=True)
class Limits:
    """What a job run may ask of a provider: ``max_questions`` per call and
    ``max_tokens`` per call (refused up front by a provider that cannot enforce it)."""

    max_questions: int | None = None
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "max_questions",
                               check_optional_count("Limits.max_questions", self.max_questions))
            object.__setattr__(self, "max_tokens",
                               check_optional_count("Limits.max_tokens", self.max_tokens))
        except ValueError as exc:
            raise InvalidDecisionRequest(str(exc)) from None


@dataclass(frozen=True)
class Capabilities:
    """What a provider can answer.

    ``kinds``: the question kinds; ``max_questions``: questions per call (None: any);
    ``enforces_max_tokens``: whether a per-call token cap can be honoured;
    ``accepts``: a per-question test returning why it cannot be answered (or None).
    """

    kinds: frozenset[str]
    max_questions: int | None = None
    enforces_max_tokens: bool = False
    accepts: Callable[[Question], str | None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # A malformed declaration is a DecisionError, as Limits' are, so a caller
        # catching the typed errors catches it too.
        try:
            if isinstance(self.kinds, (str, bytes)):
                raise TypeError  # a string is its characters, not one kind
            kinds = frozenset(self.kinds)
        except TypeError:
            raise InvalidDecisionRequest(f"Capabilities.kinds is a set of question kinds "
                                         f"from {_KINDS}; got {self.kinds!r:.60}") from None
        if not kinds or not kinds <= set(_KINDS):
            raise InvalidDecisionRequest(f"Capabilities.kinds must be a non-empty subset of "
                                         f"{_KINDS}; got {sorted(map(str, kinds))}")
        object.__setattr__(self, "kinds", kinds)
        try:
            object.__setattr__(self, "max_questions",
                               check_optional_count("Capabilities.max_questions",
                                                    self.max_questions))
        except ValueError as exc:
            raise InvalidDecisionRequest(str(exc)) from None

    def check(self, question: Question, *, count: int = 1,
              limits: Limits | None = None) -> None:
        """Raise UnsupportedCapability unless ``count`` questions like ``question`` can
        be asked in one call under ``limits``. Reads nothing but declarations."""
        kind = kind_of(question)
        if kind not in self.kinds:
            raise UnsupportedCapability(f"this provider answers {sorted(self.kinds)} "
                                        f"questions, not {kind}")
        if self.max_questions is not None and count > self.max_questions:
            raise UnsupportedCapability(f"{count} questions in one call; this provider takes "
                                        f"at most {self.max_questions}")
        if limits is not None and limits.max_tokens is not None and not self.enforces_max_tokens:
            raise UnsupportedCapability(f"Limits.max_tokens={limits.max_tokens} cannot be "
                                        "enforced by this provider")
        if self.accepts is not None:
            reason = self.accepts(question)
            if reason is not None:
                raise UnsupportedCapability(reason)


@runtime_checkable
class DecisionProvider(Protocol):
    """What nnx.decisions asks of a provider (FixedHeadProvider, JevProvider, yours)."""

    name: str

    def capabilities(self) -> Capabilities: ...

    def decide(self, question: Question, inputs: Any) -> Sequence[DecisionResult]:
        """One validated result per input, in order (a tuple, or a sequence that builds
        each row when read, as FixedHeadProvider's DecisionResults); check capabilities
        first, and refuse before returning."""
        ...

    def decide_batch(self, questions: Sequence[Question], state: Any, *,
                     limits: Limits | None = None) -> tuple[DecisionResult, ...]:
        """One result per question, in order, over one ``state``: one provider call."""
        ...
