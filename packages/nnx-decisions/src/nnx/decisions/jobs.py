"""DecisionJob (spec §17): several questions described before any is asked.

``DecisionJob.ask(q, id=)``, ``DecisionJob.collect({...})``, ``.map(f)`` and
``.then(follow)`` build an immutable tree; building calls no provider, runs no callback
and draws no RNG. :func:`nnx.decisions.running.run` / ``arun`` (also ``job.run`` /
``job.arun``) are the only effect boundaries. ``then``'s ``follow`` receives the
prerequisite's answer and returns :class:`Follow` ``(job, state=...)``: the answer is
mapped explicitly into the follow-up's state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nnx.decisions import running
from nnx.decisions.errors import InvalidDecisionRequest
from nnx.decisions.job_results import JobResult
from nnx.decisions.provider import kind_of
from nnx.decisions.questions import Question

if TYPE_CHECKING:
    from nnx.decisions.provider import DecisionProvider, Limits

__all__ = ["DecisionJob", "Follow", "Job"]


class DecisionJob:
    """A node of an immutable job tree, built with :meth:`ask` and :meth:`collect`."""

    __slots__ = ()

    @staticmethod
    def ask(question: Question, *, id: str) -> DecisionJob:
        """A job whose value is ``question``'s answer, recorded under ``id``."""
        kind_of(question)
        if not isinstance(id, str) or not id:
            raise InvalidDecisionRequest(f"DecisionJob.ask needs a non-empty string id; "
                                         f"got {id!r}")
        return _Ask(question, id)

    @staticmethod
    def collect(jobs: Mapping[str, DecisionJob]) -> DecisionJob:
        """A job whose value is ``{key: value of jobs[key]}``."""
        if not isinstance(jobs, Mapping) or not all(
                isinstance(j, DecisionJob) for j in jobs.values()):
            raise InvalidDecisionRequest("DecisionJob.collect needs a mapping of DecisionJobs")
        return _Collect(dict(jobs))

    def map(self, f: Callable[[Any], Any]) -> DecisionJob:
        """This job with ``f`` applied to its value (run once, at run time)."""
        if not callable(f):
            raise InvalidDecisionRequest(f"map needs a callable; got {type(f).__name__}")
        return _Map(self, f)

    def then(self, follow: Callable[[Any], Follow]) -> DecisionJob:
        """After this job succeeded, ``follow(value)`` returns the Follow to run next;
        this job's value becomes that follow-up's value."""
        if not callable(follow):
            raise InvalidDecisionRequest(f"then needs a callable; got {type(follow).__name__}")
        return _Then(self, follow)

    def run(self, provider: DecisionProvider, *, state: Any,
            limits: Limits | None = None) -> JobResult:
        """The job's value over ``state``: the only synchronous effect (nnx.decisions.running)."""
        return running.run(self, provider, state=state, limits=limits)

    async def arun(self, provider: DecisionProvider, *, state: Any,
                   limits: Limits | None = None, cancel: Any = None) -> JobResult:
        """``run``, awaited, stoppable through ``cancel`` (nnx.decisions.running)."""
        return await running.arun(self, provider, state=state, limits=limits, cancel=cancel)

    def _step(self, ev: running.Evaluation, state: Any) -> Any:
        raise NotImplementedError


@dataclass(frozen=True, eq=False)
class _Ask(DecisionJob):
    question: Question
    id: str

    def _step(self, ev: running.Evaluation, state: Any) -> Any:
        return ev.ask(self, state)


@dataclass(frozen=True, eq=False)
class _Collect(DecisionJob):
    jobs: Mapping[str, DecisionJob]

    def _step(self, ev: running.Evaluation, state: Any) -> Any:
        parts = {k: ev.step(j, state) for k, j in self.jobs.items()}
        return running.WAIT if any(v is running.WAIT for v in parts.values()) else parts


@dataclass(frozen=True, eq=False)
class _Map(DecisionJob):
    job: DecisionJob
    f: Callable[[Any], Any]

    def _step(self, ev: running.Evaluation, state: Any) -> Any:
        inner = ev.step(self.job, state)
        return running.WAIT if inner is running.WAIT else self.f(inner)


@dataclass(frozen=True, eq=False)
class _Then(DecisionJob):
    job: DecisionJob
    follow: Callable[[Any], Follow]

    def _step(self, ev: running.Evaluation, state: Any) -> Any:
        inner = ev.step(self.job, state)
        if inner is running.WAIT:
            return running.WAIT
        follow = ev.follows.get(id(self))
        if follow is None:  # the continuation runs once, after its prerequisite
            follow = self.follow(inner)
            if not isinstance(follow, Follow):
                raise TypeError(f"a then continuation returns Follow(job, state=...); "
                                f"got {type(follow).__name__}")
            ev.follows[id(self)] = follow
        return ev.step(follow.job, follow.state)


@dataclass(frozen=True)
class Follow:
    """What a ``then`` continuation returns: the next job and the state it reads."""

    job: DecisionJob
    state: Any

    def __post_init__(self) -> None:
        if not isinstance(self.job, DecisionJob):
            raise InvalidDecisionRequest(f"Follow.job must be a DecisionJob; got "
                                         f"{type(self.job).__name__}")


# The spec's diagram writes the builders as ``Job.ask`` / ``Job.collect``: one class, two names.
Job = DecisionJob
