"""run / arun (spec §17): the only effects of a DecisionJob.

Rounds: every question reachable without waiting on a ``then`` is asked; questions
over the same state (the run's, or one a Follow names) share provider calls,
``ceil(count / cap)`` of them in order, ``cap = min(provider max_questions,
Limits.max_questions)``. Then each ready continuation runs once and the next round
asks its questions. Duplicate ids, unsupported questions and an unenforceable token
cap are refused before any call of the round that would ask them (the first round
holds every question known up front). Fail-fast: a provider's DecisionError ends the
run with JobFailed. The provider is borrowed, never closed.
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
                raise InvalidDecisionRequest(f"job id {node.id!r} is asked more than once")
            return answer
        self.waiting.append(_Pending(node, state))
        return WAIT


def _cap(caps: Capabilities, limits: Limits) -> int | None:
    bounds = [b for b in (caps.max_questions, limits.max_questions) if b is not None]
    return min(bounds) if bounds else None


class _Plan:
    """The calls of one round, checked before the first of them is made."""

    def __init__(self, waiting: list[_Pending], asked: dict[str, str], caps: Capabilities,
                 limits: Limits) -> None:
        seen = set(asked)
        for p in waiting:
            if p.ask.id in seen:
                raise InvalidDecisionRequest(f"job id {p.ask.id!r} is asked more than once")
            seen.add(p.ask.id)
        cap = _cap(caps, limits)
        for p in waiting:
            caps.check(p.ask.question, limits=limits)
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
        self.evaluation.waiting = []
        value = self.evaluation.step(self.job, self.state)
        if value is not WAIT:
            return JobResult(value, dict(self.outcomes), tuple(self.calls))
        return _Plan(self.evaluation.waiting, self.outcomes, self.caps, self.limits)

    def answered(self, chunk: Sequence[_Pending], results: Any) -> None:
        for p, r in zip(chunk, _checked(chunk, results), strict=True):
            self.evaluation.answers[p.ask.id] = (p.ask, r)
            self.outcomes[p.ask.id] = "answered"

    def stop(self, error: type[JobFailed], message: str, rest: Sequence[_Pending],
             now: Sequence[_Pending], now_outcome: str, rest_outcome: str) -> JobFailed:
        for p in now:
            self.outcomes[p.ask.id] = now_outcome
        for p in rest:
            self.outcomes[p.ask.id] = rest_outcome
        return error(message, outcomes=self.outcomes, calls=tuple(self.calls))


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
                rest = [p for c, _ in plan.calls[n + 1:] for p in c]
                raise runner.stop(JobFailed, f"job failed at {[p.ask.id for p in chunk]}: "
                                  f"{exc}", rest, chunk, "failed", "skipped") from exc


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
            rest = [p for c, _ in plan.calls[n + 1:] for p in c]
            if _is_set(cancel):
                raise runner.stop(JobCancelled, "job cancelled", rest, chunk, "cancelled",
                                  "cancelled")
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
                                  rest, chunk, "sent", "cancelled")
            try:
                runner.answered(chunk, call.result())
            except DecisionError as exc:
                raise runner.stop(JobFailed, f"job failed at {[p.ask.id for p in chunk]}: "
                                  f"{exc}", rest, chunk, "failed", "skipped") from exc
