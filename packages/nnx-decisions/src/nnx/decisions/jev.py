"""JevProvider (spec §17, docs/decisions.md §6): hosted Jev models through the TypeSafe
SDK (the ``jev`` extra: ``pip install "nnx-decisions[jev]"``).

* One ``system_one`` request per text, holding every question of the call: a Choice
  becomes the SDK's ``Choice`` (criteria keyed by option id, described by the
  option's description), a Boolean its ``Noul``, a Score its ``Score`` (one criterion
  per level, lowest first).
* The SDK's ``RetryPolicy`` owns retries (``retry=``); nothing here retries again.
* A failure after those retries is a :class:`~nnx.decisions.JevError` carrying the
  service's request id and HTTP status.
* Jev's ``confidence`` is kept as the result's provider confidence (never a
  probability of being right); a Score's expected score is ``vendor_score``. Every
  answer still goes through ``validate_response``.
* A caller's client (``client=``) is borrowed and never closed; a client this
  provider built is closed by ``close()`` / ``with``.

The SDK is imported when a provider is built, so importing nnx.decisions needs no
hosted-SDK extra.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType
from typing import Any

from nnx.decisions.errors import InvalidDecisionRequest, InvalidDecisionResponse, JevError
from nnx.decisions.provider import Capabilities, Limits
from nnx.decisions.questions import Boolean, Choice, Question, Score
from nnx.decisions.results import DecisionResult
from nnx.decisions.validation import validate_response
from nnx.extend import check_count

__all__ = ["DEFAULT_MAX_QUESTIONS", "JevProvider"]

#: Questions per system_one request unless ``max_questions=`` says otherwise.
DEFAULT_MAX_QUESTIONS = 16


def _sdk() -> Any:
    try:
        import typesafe_sdk
    except ImportError as exc:
        raise ImportError('JevProvider needs the TypeSafe SDK: pip install '
                          '"nnx-decisions[jev]"') from exc
    return typesafe_sdk


class JevProvider:
    """Typed decisions from hosted Jev models (module docstring for the rules).

    ``client``: a ``typesafe_sdk.TypeSafeClient`` to borrow; without it one is built
    from ``client_options`` (``api_key=``, ``base_url=``, ``timeout=``, ...) with
    ``retry``. ``model``: the Jev model (None: the client's default).
    """

    def __init__(self, *, client: Any = None, model: str | None = None, retry: Any = None,
                 max_questions: int = DEFAULT_MAX_QUESTIONS, name: str = "jev",
                 **client_options: Any) -> None:
        sdk = _sdk()
        self._sdk = sdk
        self.name = name
        self.model = model
        self.max_questions = check_count("JevProvider.max_questions", max_questions)
        if retry is not None and not isinstance(retry, sdk.RetryPolicy):
            raise InvalidDecisionRequest(f"retry= is a typesafe_sdk.RetryPolicy; got "
                                         f"{type(retry).__name__}")
        self._owns_client = client is None
        if client is None:
            client = sdk.TypeSafeClient(retry=retry, **client_options)
            self._retry = None  # the client holds it
        else:
            if client_options:
                raise InvalidDecisionRequest(f"client options {sorted(client_options)} apply "
                                             "to a client this provider builds, not to client=")
            self._retry = retry  # a per-call override of the borrowed client's policy
        self.client = client

    # -- lifetime: only an owned client is closed ----------------------------------------

    def close(self) -> None:
        if self._owns_client:
            self.client.close()

    def __enter__(self) -> JevProvider:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- the provider protocol -----------------------------------------------------------

    def capabilities(self) -> Capabilities:
        return Capabilities(frozenset({"choice", "boolean", "score"}),
                            max_questions=self.max_questions)

    def decide(self, question: Question, inputs: Any) -> tuple[DecisionResult, ...]:
        """One system_one request per text of ``inputs`` (a sequence of texts)."""
        self.capabilities().check(question)
        if isinstance(inputs, str) or not isinstance(inputs, Sequence):
            raise InvalidDecisionRequest("JevProvider.decide takes a sequence of texts")
        return tuple(self.decide_batch([question], text)[0] for text in inputs)

    def decide_batch(self, questions: Sequence[Question], state: Any, *,
                     limits: Limits | None = None) -> tuple[DecisionResult, ...]:
        """Every question over one text: exactly one system_one request."""
        caps = self.capabilities()
        for q in questions:
            caps.check(q, count=len(questions), limits=limits)
        if not isinstance(state, str) or not state:
            raise InvalidDecisionRequest("a Jev state is a non-empty text")
        names = [f"q{i}" for i in range(len(questions))]
        wire = {n: self._wire(q) for n, q in zip(names, questions, strict=True)}
        options: dict[str, Any] = {"model": self.model}
        if self._retry is not None:
            options["retry"] = self._retry
        try:
            response = self.client.system_one(state, wire, **options)
        except self._sdk.TypeSafeError as exc:
            raise JevError(f"{self.name}: {type(exc).__name__}: {exc}",
                           request_id=getattr(exc, "request_id", None),
                           status=getattr(exc, "status", None)) from exc
        request_id = response.__dict__.get("_request_id")
        return tuple(self._result(q, response.answers.get(n), request_id, response.model)
                     for n, q in zip(names, questions, strict=True))

    # -- translation ------------------------------------------------------------------------

    def _wire(self, question: Question) -> Any:
        sdk = self._sdk
        if isinstance(question, Choice):
            return sdk.Choice(instructions=question.prompt,
                              criteria={o.id: o.description for o in question.options})
        if isinstance(question, Score):
            return sdk.Score(instructions=question.prompt,
                             criteria=[level.description for level in question.levels])
        return sdk.Noul(instructions=question.prompt)

    def _result(self, question: Question, answer: Any, request_id: str | None,
                model: str) -> DecisionResult:
        expected = {Choice: "choice", Score: "score", Boolean: "noul"}[type(question)]
        if answer is None or getattr(answer, "type", None) != expected:
            raise InvalidDecisionResponse(f"{self.name}: no {expected} answer for "
                                          f"{question.prompt!r} (request_id={request_id})")
        raw = {"answer": answer.model_dump(mode="json"), "model": model,
               "request_id": request_id}
        if isinstance(question, Boolean):
            return validate_response(question, answer.noul, provider=self.name, raw=raw)
        if isinstance(question, Choice):
            return validate_response(question, answer.probabilities, provider=self.name,
                                     raw=raw, confidence=answer.confidence)
        # Score levels come back keyed by integer level; name them by the level ids (an
        # out-of-range level stays a string key, which validate_response refuses).
        ids = question.ids
        keyed = [(ids[k] if isinstance(k, int) and 0 <= k < len(ids) else str(k), p)
                 for k, p in answer.probabilities.items()]
        return validate_response(question, keyed, provider=self.name, raw=raw,
                                 confidence=answer.confidence, vendor_score=answer.score)
