"""run / arun (spec §17): the only effects of a DecisionJob.

Rounds: every question reachable without waiting on a ``then`` is asked; questions
over the same state (the run's, or one a Follow names) share provider calls,
``ceil(count / cap)`` of them in order, ``cap = min(provider max_questions,
Limits.max_questions)``. Then each ready continuation runs once and the next round
asks its questions. Duplicate ids, unsupported questions and an unenforceable token
cap are refused before any call of the round that would ask them (the first round
holds every question known up front). Fail-fast: a provider's DecisionError ends the
run with JobFailed; so does a later round's refusal, since earlier rounds' calls were
already made and their outcomes must not be lost (the refused id failed, the rest of
its round skipped; a reused id keeps its completed "answered"). A first-round refusal
is raised as itself, before any call. The provider is borrowed, never closed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from nnx.decisions.errors import DecisionError, InvalidDecisionRequest, InvalidDecisionResponse
from nnx.decisions.job_results import JobCancelled, JobFailed, JobResult
from nnx.decisions.provider import Capabilities, DecisionProvider, Limits, kind_of
from nnx.decisions.results import BooleanResult, ChoiceResult, ScoreResult

__all__ = ["WAIT", "Evaluation", "arun", "run"]

#: A node whose value is not known yet.
WAIT = object()
_RESULT = {"choice": ChoiceResult, "boolean": BooleanResult, "score": ScoreResult}


@dataclass
class _Pending:
    ask: Any  # a job's ask node: .question, .id
    state: Any


class Evaluation:
    """One run's memory: answers by id, each node's value once known (so a callback
    runs once), each continuation's Follow; the questions still waiting this round."""

    def __init__(self) -> None:
        self.answers: dict[str, tuple[Any, Any]] = {}  # id -> (ask node, answer)
        self.values: dict[int, Any] = {}
        self.follows: dict[int, Any] = {}
        self.keep: list[Any] = []  # nodes stay alive, so id(node) stays theirs
        self.waiting: list[_Pending] = []
        self.refused: str | None = None  # the id this round's refusal names

    def refuse(self, job_id: str, error: DecisionError) -> DecisionError:
        """``error``, recorded as the round's refusal of ``job_id`` (so the runner tells
        it from a callback's own error)."""
        self.refused = job_id
        return error

    def step(self, node: Any, state: Any) -> Any:
        key = id(node)
        if key in self.values:
            return self.values[key]
        value = node._step(self, state)
        if value is not WAIT:
            self.values[key] = value
            self.keep.append(node)
        return value

    def ask(self, node: Any, state: Any) -> Any:
        if node.id in self.answers:
            asked, answer = self.answers[node.id]
            if asked is not node:  # another question under an id already answered
                raise self.refuse(node.id, InvalidDecisionRequest(
                    f"job id {node.id!r} is asked more than once"))
            return answer
        self.waiting.append(_Pending(node, state))
        return WAIT


def _cap(caps: Capabilities, limits: Limits) -> int | None:
    bounds = [b for b in (caps.max_questions, limits.max_questions) if b is not None]
    return min(bounds) if bounds else None


class _Plan:
    """The calls of one round, checked before the first of them is made."""

    def __init__(self, ev: Evaluation, asked: dict[str, str], caps: Capabilities,
                 limits: Limits) -> None:
        waiting = ev.waiting
        seen = set(asked)
        for p in waiting:
            if p.ask.id in seen:
                raise ev.refuse(p.ask.id, InvalidDecisionRequest(
                    f"job id {p.ask.id!r} is asked more than once"))
            seen.add(p.ask.id)
        cap = _cap(caps, limits)
        for p in waiting:
            ev.refused = p.ask.id  # what check's refusal names
            caps.check(p.ask.question, limits=limits)
        ev.refused = None
        groups: dict[int, list[_Pending]] = {}
        states: dict[int, Any] = {}
        for p in waiting:  # one group per state object, in asking order
            groups.setdefault(id(p.state), []).append(p)
            states[id(p.state)] = p.state
        self.calls: list[tuple[list[_Pending], Any]] = []
        for key, group in groups.items():
            size = cap or len(group)
            for start in range(0, len(group), size):
                self.calls.append((group[start:start + size], states[key]))


def _checked(chunk: Sequence[_Pending], given: Any) -> list[Any]:
    results: list[Any] = list(given)
    if len(results) != len(chunk):
        raise InvalidDecisionResponse(f"the provider answered {len(results)} of "
                                      f"{len(chunk)} questions")
    for p, r in zip(chunk, results, strict=True):
        expected: type[Any] = _RESULT[kind_of(p.ask.question)]
        if not isinstance(r, expected) or r.question != p.ask.question:
            raise InvalidDecisionResponse(f"the provider's answer for {p.ask.id!r} is not a "
                                          f"{expected.__name__} of its question")
    return results


class _Runner:
    def __init__(self, job: Any, provider: DecisionProvider, state: Any,
                 limits: Limits | None) -> None:
        if not hasattr(job, "_step"):
            raise TypeError(f"run needs a DecisionJob; got {type(job).__name__}")
        self.job, self.provider, self.state = job, provider, state
        self.limits = limits if limits is not None else Limits()
        self.caps = provider.capabilities()
        self.evaluation = Evaluation()
        self.outcomes: dict[str, str] = {}
        self.calls: list[tuple[str, ...]] = []

    def next_plan(self) -> _Plan | Any:
        ev = self.evaluation
        ev.waiting, ev.refused = [], None
        try:
            value = ev.step(self.job, self.state)
            if value is not WAIT:
                return JobResult(value, dict(self.outcomes), tuple(self.calls))
            return _Plan(ev, self.outcomes, self.caps, self.limits)
        except DecisionError as exc:
            refused = ev.refused
            if refused is None or not self.calls:
                raise  # a callback's own error, or a refusal before any call
            # A later round's refusal: earlier rounds' calls were made, so it is a
            # JobFailed carrying their outcomes, never a bare refusal that drops them.
            now = [] if refused in self.outcomes else [refused]
            rest = [p.ask.id for p in ev.waiting if p.ask.id != refused]
            raise self.stop(JobFailed, f"job refused {refused!r} after "
                            f"{len(self.calls)} call(s): {exc}", now, "failed",
                            rest, "skipped") from exc

    def answered(self, chunk: Sequence[_Pending], results: Any) -> None:
        for p, r in zip(chunk, _checked(chunk, results), strict=True):
            self.evaluation.answers[p.ask.id] = (p.ask, r)
            self.outcomes[p.ask.id] = "answered"

    def stop(self, error: type[JobFailed], message: str, now: Sequence[str],
             now_outcome: str, rest: Sequence[str], rest_outcome: str) -> JobFailed:
        for job_id in now:
            self.outcomes[job_id] = now_outcome
        for job_id in rest:
            self.outcomes[job_id] = rest_outcome
        return error(message, outcomes=self.outcomes, calls=tuple(self.calls))


def _ids(chunk: Sequence[_Pending]) -> list[str]:
    return [p.ask.id for p in chunk]


def _rest(plan: _Plan, n: int) -> list[str]:
    """The ids of the round's calls after the ``n``-th."""
    return [p.ask.id for c, _ in plan.calls[n + 1:] for p in c]


def run(job: Any, provider: DecisionProvider, *, state: Any,
        limits: Limits | None = None) -> JobResult:
    """Run ``job`` against ``provider`` over ``state`` (module docstring)."""
    runner = _Runner(job, provider, state, limits)
    while True:
        plan = runner.next_plan()
        if isinstance(plan, JobResult):
            return plan
        for n, (chunk, chunk_state) in enumerate(plan.calls):
            runner.calls.append(tuple(p.ask.id for p in chunk))
            try:
                results = provider.decide_batch([p.ask.question for p in chunk], chunk_state,
                                                limits=runner.limits)
                runner.answered(chunk, results)
            except DecisionError as exc:
                raise runner.stop(JobFailed, f"job failed at {_ids(chunk)}: {exc}",
                                  _ids(chunk), "failed", _rest(plan, n), "skipped") from exc


def _is_set(cancel: Any) -> bool:
    return cancel is not None and bool(cancel.is_set())


async def _call(provider: DecisionProvider, questions: list[Any], state: Any,
                limits: Limits) -> Any:
    adecide: Callable[..., Any] | None = getattr(provider, "adecide_batch", None)
    if adecide is not None:
        return await adecide(questions, state, limits=limits)
    return await asyncio.to_thread(provider.decide_batch, questions, state, limits=limits)


async def arun(job: Any, provider: DecisionProvider, *, state: Any,
               limits: Limits | None = None, cancel: Any = None) -> JobResult:
    """``run``, awaited: the provider's ``adecide_batch`` when it has one, else its
    ``decide_batch`` in a worker thread. ``cancel`` (an ``asyncio.Event`` or anything
    with ``is_set()``) stops scheduling: JobCancelled reports never-sent ids as
    ``cancelled`` and a request in flight as ``sent``."""
    runner = _Runner(job, provider, state, limits)
    while True:
        plan = runner.next_plan()
        if isinstance(plan, JobResult):
            return plan
        for n, (chunk, chunk_state) in enumerate(plan.calls):
            rest = _rest(plan, n)
            if _is_set(cancel):
                raise runner.stop(JobCancelled, "job cancelled", _ids(chunk), "cancelled",
                                  rest, "cancelled")
            runner.calls.append(tuple(p.ask.id for p in chunk))
            call = asyncio.ensure_future(_call(provider, [p.ask.question for p in chunk],
                                               chunk_state, runner.limits))
            waits: set[asyncio.Future[Any]] = {call}
            stopper = None
            if isinstance(cancel, asyncio.Event):
                stopper = asyncio.ensure_future(cancel.wait())
                waits.add(stopper)
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if stopper is not None:
                    stopper.cancel()
            if not call.done():
                call.cancel()  # the request is out: reported as sent, not rolled back
                raise runner.stop(JobCancelled, "job cancelled with a request in flight",
                                  _ids(chunk), "sent", rest, "cancelled")
            try:
                runner.answered(chunk, call.result())
            except DecisionError as exc:
                raise runner.stop(JobFailed, f"job failed at {_ids(chunk)}: {exc}",
                                  _ids(chunk), "failed", rest, "skipped") from exc
