"""DecisionJob (spec §17): an immutable tree, run / arun the only effects, ceil(count /
cap) calls, then-continuations, fail-fast JobFailed, cancellation, map's laws."""

from __future__ import annotations

import asyncio
import math
import random

import numpy as np
import pytest
import torch
from _decision_models import Counting
from hypothesis import given, settings
from hypothesis import strategies as st

from nnx.decisions import (
    Boolean,
    Capabilities,
    Choice,
    DecisionError,
    Follow,
    InvalidDecisionRequest,
    Job,
    JobCancelled,
    JobFailed,
    JobResult,
    Limits,
    Score,
    UnsupportedCapability,
)


def choice(i: int) -> Choice:
    return Choice(f"question {i}?", [("a", "A"), ("b", "B"), ("c", "C")])


def asks(n: int) -> dict[str, object]:
    return {f"q{i}": Job.ask(choice(i), id=f"q{i}") for i in range(n)}


def test_decision_job_itself_has_the_builders_the_spec_names_and_job_is_its_alias() -> None:
    import nnx

    # Spec §17: "DecisionJob.ask, collect, map and then build an immutable tree", reached
    # through the top-level name nnx exports; Job stays the same class under a shorter name.
    assert Job is nnx.DecisionJob
    job = nnx.DecisionJob.collect({"a": nnx.DecisionJob.ask(choice(1), id="a"),
                                   "b": nnx.DecisionJob.ask(Boolean("b?"), id="b")})
    assert isinstance(job, nnx.DecisionJob)
    provider = Counting()
    result = job.run(provider, state="s")
    assert result.outcomes == {"a": "answered", "b": "answered"} and len(provider.calls) == 1
    with pytest.raises(InvalidDecisionRequest, match=r"DecisionJob\.ask"):
        nnx.DecisionJob.ask(choice(1), id="")
    with pytest.raises(InvalidDecisionRequest, match=r"DecisionJob\.collect"):
        nnx.DecisionJob.collect({"a": "not a job"})


def test_building_calls_no_provider_runs_no_callback_draws_no_rng() -> None:
    provider = Counting()
    ran: list[str] = []
    states = (random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state())
    job = Job.collect(asks(3)).map(lambda v: ran.append("map") or v).then(
        lambda v: ran.append("then") or Follow(Job.ask(Boolean("more?"), id="more"), state=1))
    assert job is not None and provider.calls == [] and ran == []
    assert random.getstate() == states[0]
    assert (np.random.get_state()[1] == states[1]).all()
    assert torch.equal(torch.get_rng_state(), states[2])
    result = job.run(provider, state="text")
    assert ran == ["map", "then"] and len(provider.calls) == 2
    assert result.outcomes == {"q0": "answered", "q1": "answered", "q2": "answered",
                               "more": "answered"}


@pytest.mark.parametrize("count, provider_cap, limit_cap", [
    (7, 3, None), (7, None, 2), (7, 4, 2), (7, 2, 5), (6, 3, 3), (5, None, None), (1, 4, 4)])
def test_independent_questions_share_ceil_count_over_cap_calls(count, provider_cap,
                                                               limit_cap) -> None:
    provider = Counting(max_questions=provider_cap)
    result = Job.collect(asks(count)).run(provider, state="s",
                                          limits=Limits(max_questions=limit_cap))
    caps = [c for c in (provider_cap, limit_cap) if c is not None]
    cap = min(caps) if caps else count
    assert len(provider.calls) == math.ceil(count / cap) == len(result.calls)
    # in order: the calls carry the questions as they were asked
    assert [q for call in provider.calls for q in call] == [f"question {i}?" for i in range(count)]
    assert set(result.value) == {f"q{i}" for i in range(count)}
    assert not provider.closed  # borrowed, never closed


def test_then_runs_once_after_its_prerequisite_over_the_follow_state() -> None:
    provider = Counting()
    seen: list[object] = []

    def follow(answer):
        seen.append(answer.choice)
        return Follow(Job.ask(Boolean(f"is it {answer.choice}?"), id="check"),
                      state=f"about {answer.choice}")

    job = Job.collect({"a": Job.ask(choice(1), id="a"),
                       "b": Job.ask(choice(2), id="b").then(follow)}).map(
        lambda v: (v["a"].choice, v["b"].p_true))
    result = job.run(provider, state="doc")
    assert len(seen) == 1
    assert provider.calls == [("question 1?", "question 2?"), (f"is it {seen[0]}?",)]
    direct = Counting().decide_batch([Boolean(f"is it {seen[0]}?")], f"about {seen[0]}")[0]
    assert result.value[1] == direct.p_true
    assert result.calls == (("a", "b"), ("check",))


def test_duplicate_ids_and_unsupported_questions_are_refused_before_any_call() -> None:
    provider = Counting(kinds=("choice",))
    with pytest.raises(InvalidDecisionRequest, match="more than once"):
        Job.collect({"x": Job.ask(choice(1), id="same"),
                     "y": Job.ask(choice(2), id="same")}).run(provider, state="s")
    with pytest.raises(UnsupportedCapability, match="boolean"):
        Job.collect({"x": Job.ask(choice(1), id="x"),
                     "y": Job.ask(Boolean("b?"), id="y")}).run(provider, state="s")
    with pytest.raises(UnsupportedCapability, match="max_tokens"):
        Job.ask(choice(1), id="x").run(provider, state="s", limits=Limits(max_tokens=100))
    assert provider.calls == []


def _later_round(follow_up: object) -> object:
    """Two answered questions, then ``follow_up`` asked in the second round."""
    return Job.collect(asks(2)).then(lambda v: Follow(follow_up, state=0))


@pytest.mark.parametrize("follow_up, cause, failed, skipped", [
    # a question the provider does not answer, between two it does
    (Job.collect({"a": Job.ask(choice(7), id="a"), "b": Job.ask(Boolean("b?"), id="b"),
                  "c": Job.ask(choice(8), id="c")}), UnsupportedCapability, ("b",), ("a", "c")),
    # an id reused inside the later round
    (Job.collect({"m": Job.ask(choice(7), id="n"), "k": Job.ask(choice(8), id="n"),
                  "c": Job.ask(choice(9), id="c")}), InvalidDecisionRequest, ("n",), ("c",)),
    # an id an earlier round answered: its completed outcome stays "answered"
    (Job.collect({"c": Job.ask(choice(9), id="c"), "again": Job.ask(choice(5), id="q0")}),
     InvalidDecisionRequest, (), ("c",)),
], ids=["unsupported", "duplicate-in-round", "reused-answered-id"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["run", "arun"])
def test_a_later_rounds_refusal_is_job_failed_keeping_the_earlier_outcomes(
        follow_up, cause, failed, skipped, asynchronous) -> None:
    provider = Counting(kinds=("choice",))
    job = _later_round(follow_up)
    with pytest.raises(JobFailed) as info:
        if asynchronous:
            asyncio.run(job.arun(provider, state="s"))
        else:
            job.run(provider, state="s")
    refused = info.value
    assert type(refused.__cause__) is cause and not hasattr(refused, "value")
    assert refused.answered == ("q0", "q1")  # the first round's calls were made
    assert refused.failed == failed and refused.skipped == skipped
    assert refused.calls == (("q0", "q1"),) and len(provider.calls) == 1  # none in round 2


def test_a_failing_question_fails_fast_with_outcomes_and_no_value() -> None:
    provider = Counting(max_questions=2, fail_on="question 2?")
    job = Job.collect(asks(5)).then(
        lambda v: Follow(Job.ask(Score("s?", [("lo", "L"), ("hi", "H")]), id="later"), state=0))
    with pytest.raises(JobFailed) as info:
        job.run(provider, state="s")
    failed = info.value
    assert failed.answered == ("q0", "q1")
    assert failed.failed == ("q2", "q3")
    assert failed.skipped == ("q4",)
    assert "later" not in failed.outcomes and not hasattr(failed, "value")
    assert failed.calls == (("q0", "q1"), ("q2", "q3"))
    assert len(provider.calls) == 2
    assert type(failed.__cause__).__name__ == "ProviderFailure"


def test_a_callback_error_propagates_unchanged() -> None:
    with pytest.raises(ZeroDivisionError):
        Job.ask(choice(1), id="x").map(lambda v: 1 / 0).run(Counting(), state="s")
    with pytest.raises(TypeError, match="Follow"):
        Job.ask(choice(1), id="x").then(lambda v: v).run(Counting(), state="s")


def test_arun_matches_run_and_borrows_the_provider() -> None:
    job = Job.collect(asks(5)).map(lambda v: {k: r.choice for k, r in v.items()})
    provider = Counting(max_questions=2)
    result = asyncio.run(job.arun(provider, state="s"))
    assert result == job.run(Counting(max_questions=2), state="s")
    assert len(provider.calls) == 3 and not provider.closed


class Slow(Counting):
    """An async provider whose second call never finishes on its own."""

    def __init__(self) -> None:
        super().__init__(max_questions=1)
        self.started = asyncio.Event()

    async def adecide_batch(self, questions, state, *, limits=None):
        if self.calls:
            self.calls.append(tuple(q.prompt for q in questions))
            self.started.set()
            await asyncio.sleep(3600)
        return self.decide_batch(questions, state, limits=limits)


def test_cancellation_stops_scheduling_and_reports_sent_requests_as_sent() -> None:
    async def scenario() -> JobCancelled:
        provider = Slow()
        cancel = asyncio.Event()
        task = asyncio.ensure_future(Job.collect(asks(4)).arun(provider, state="s",
                                                               cancel=cancel))
        await provider.started.wait()
        cancel.set()
        with pytest.raises(JobCancelled) as info:
            await task
        return info.value

    cancelled = asyncio.run(scenario())
    assert cancelled.outcomes == {"q0": "answered", "q1": "sent", "q2": "cancelled",
                                  "q3": "cancelled"}
    assert cancelled.calls == (("q0",), ("q1",))

    before = Counting()
    event = asyncio.Event()
    event.set()
    with pytest.raises(JobCancelled) as info:
        asyncio.run(Job.collect(asks(2)).arun(before, state="s", cancel=event))
    assert before.calls == [] and info.value.cancelled == ("q0", "q1")


# -- map's laws, for a deterministic provider ------------------------------------------

functions = st.sampled_from([lambda v: v, lambda v: str(v)[:7], lambda v: hash(str(v)) % 13,
                             lambda v: (v, 1), lambda v: len(str(v))])


def _value(job, cap) -> object:
    return job.run(Counting(max_questions=cap), state="law").value


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 5), cap=st.one_of(st.none(), st.integers(1, 4)))
def test_map_identity_law(n: int, cap: int | None) -> None:
    job = Job.collect(asks(n))
    assert _value(job.map(lambda v: v), cap) == _value(job, cap)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 5), cap=st.one_of(st.none(), st.integers(1, 4)), f=functions,
       g=functions)
def test_map_composition_law(n: int, cap: int | None, f, g) -> None:
    job = Job.collect(asks(n))
    assert _value(job.map(f).map(g), cap) == _value(job.map(lambda v: g(f(v))), cap)


def test_job_result_is_plain() -> None:
    result = Job.ask(choice(0), id="only").run(Counting(), state="s")
    assert isinstance(result, JobResult) and result.outcomes == {"only": "answered"}
    with pytest.raises(InvalidDecisionRequest):
        Job.ask(choice(0), id="")
    with pytest.raises(InvalidDecisionRequest):
        Job.ask("not a question", id="x")  # type: ignore[arg-type]


@pytest.mark.parametrize("build", [
    lambda: Capabilities(frozenset({"choice", "essay"})),   # an unknown kind
    lambda: Capabilities(frozenset()),                      # no kind
    lambda: Capabilities("choice"),                         # a string, not a set of kinds
    lambda: Capabilities(None),                             # no kinds at all
    lambda: Capabilities(frozenset({"choice"}), max_questions=0),
    lambda: Capabilities(frozenset({"choice"}), max_questions=2.5),
    lambda: Limits(max_questions=0),
    lambda: Limits(max_tokens=-1),
], ids=["unknown-kind", "no-kind", "string", "none", "cap-0", "cap-float", "limit-0",
        "tokens-negative"])
def test_malformed_capabilities_and_limits_are_typed_decision_errors(build) -> None:
    with pytest.raises(InvalidDecisionRequest) as info:
        build()
    assert isinstance(info.value, DecisionError)
