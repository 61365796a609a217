"""Decision jobs (spec §17): several typed questions described before any is asked.

A DecisionJob is an immutable tree (ask / collect / map / then); run and arun are its
only effects. Here a deterministic local provider shows the batching rule (ceil(count /
cap) calls per state), a then-continuation that maps an answer into the next state,
fail-fast JobFailed with its outcomes and no partial value, and cancellation. Offline.

    uv run python examples/decision_jobs.py
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from typing import Any

from nnx.decisions import (
    Boolean,
    Capabilities,
    Choice,
    Follow,
    Job,
    JobCancelled,
    JobFailed,
    Limits,
    ProviderFailure,
    Question,
    validate_response,
)


class KeywordProvider:
    """A deterministic provider: it reads keywords in the text. Each question's answer
    depends on the question and the text only, never on what it is batched with."""

    name = "keywords"

    def __init__(self, max_questions: int = 3) -> None:
        self.max_questions = max_questions
        self.calls: list[int] = []

    def capabilities(self) -> Capabilities:
        return Capabilities(frozenset({"choice", "boolean"}), max_questions=self.max_questions)

    def decide_batch(self, questions: Sequence[Question], state: Any, *,
                     limits: Limits | None = None) -> tuple[Any, ...]:
        self.calls.append(len(questions))
        text = str(state).lower()
        out = []
        for q in questions:
            if "broken" in q.prompt:
                raise ProviderFailure("the keyword service is down")
            if isinstance(q, Boolean):
                word = q.prompt.split("'")[1]
                out.append(validate_response(q, 0.9 if word in text else 0.1, provider=self.name))
                continue
            assert isinstance(q, Choice)
            hits = [1.0 + 3.0 * (o.id in text) for o in q.options]
            out.append(validate_response(q, {o.id: h / sum(hits) for o, h in
                                             zip(q.options, hits, strict=True)},
                                         provider=self.name))
        return tuple(out)


TICKET = "Refund please: I was charged twice for my order and I am angry."
TOPIC = Choice("What is the ticket about?", [("refund", "Money back"),
                                              ("delivery", "Shipping"), ("login", "Access")])


def flags(n: int) -> dict[str, Any]:
    words = ["charged", "angry", "order", "twice", "please", "password", "late"]
    return {w: Job.ask(Boolean(f"Does it say '{w}'?"), id=w) for w in words[:n]}


def main() -> None:
    # Seven independent questions over one text, cap min(3, 2) = 2: ceil(7 / 2) = 4 calls.
    provider = KeywordProvider(max_questions=3)
    job = Job.collect(flags(7)).map(lambda v: sorted(k for k, r in v.items() if r.p_true > 0.5))
    result = job.run(provider, state=TICKET, limits=Limits(max_questions=2))
    print(f"flags: {result.value}; calls: {result.calls}")
    assert len(provider.calls) == math.ceil(7 / 2) == len(result.calls)

    # then: the topic answer is mapped explicitly into the follow-up's state.
    def follow(topic: Any) -> Follow:
        note = f"{topic.choice} ticket: {TICKET}"
        return Follow(Job.ask(Boolean("Does it say 'refund'?"), id="confirm"), state=note)

    chained = Job.collect({"topic": Job.ask(TOPIC, id="topic").then(follow),
                           "angry": Job.ask(Boolean("Does it say 'angry'?"), id="angry")})
    answer = chained.run(KeywordProvider(), state=TICKET)
    print(f"then: confirm p_true={answer.value['topic'].p_true}; outcomes {answer.outcomes}")
    assert answer.calls == (("topic", "angry"), ("confirm",))

    # Fail-fast: the outcomes so far, the failed and skipped ids, no partial value.
    broken = Job.collect({**flags(2), "x": Job.ask(Boolean("Is the 'broken' thing on?"), id="x"),
                          **{k: v for k, v in list(flags(5).items())[2:]}})
    try:
        broken.run(KeywordProvider(max_questions=1), state=TICKET)
    except JobFailed as failed:
        print(f"failed: answered {failed.answered}, failed {failed.failed}, "
              f"skipped {failed.skipped}")
        assert failed.failed == ("x",) and len(failed.skipped) == 3

    # Cancellation before scheduling: nothing is sent.
    cancel = asyncio.Event()
    cancel.set()
    try:
        asyncio.run(job.arun(KeywordProvider(), state=TICKET, cancel=cancel))
    except JobCancelled as cancelled:
        print(f"cancelled: {len(cancelled.cancelled)} questions never sent")
        assert not cancelled.sent

    # map's laws on this deterministic provider.
    base = Job.collect(flags(4))
    assert base.map(lambda v: v).run(KeywordProvider(), state=TICKET).value == \
        base.run(KeywordProvider(), state=TICKET).value
    f, g = (lambda v: sorted(v)), (lambda keys: ",".join(keys))
    assert base.map(f).map(g).run(KeywordProvider(), state=TICKET).value == \
        base.map(lambda v: g(f(v))).run(KeywordProvider(), state=TICKET).value
    print("map's identity and composition laws hold")


if __name__ == "__main__":
    main()
