"""JevProvider (spec §17) against a local stub of the service: one request per text,
the SDK's RetryPolicy, JevErrors with request ids, borrowed clients never closed."""

from __future__ import annotations

import pytest
from _jev_stub import JevStub

from nnx.decisions import (
    Boolean,
    BooleanResult,
    Choice,
    ChoiceResult,
    InvalidDecisionResponse,
    JevError,
    Job,
    Limits,
    Score,
    ScoreResult,
    UnsupportedCapability,
)

typesafe_sdk = pytest.importorskip("typesafe_sdk")
from nnx.decisions import JevProvider  # noqa: E402 - after the extra's skip

TONE = Choice("What is the tone?", [("calm", "Calm and polite"), ("angry", "Angry")])
BILLING = Boolean("Is this about billing?")
URGENCY = Score("How urgent?", [("low", "Can wait"), ("mid", "This week"), ("high", "Today")])
NO_RETRY = typesafe_sdk.RetryPolicy(max_retries=0)


def client(stub: JevStub, retry=NO_RETRY):
    return typesafe_sdk.TypeSafeClient(api_key="test-key", base_url=stub.url,
                                       compression=False, retry=retry)


def test_one_system_one_request_per_text_holding_every_question() -> None:
    with JevStub() as stub, client(stub) as c:
        provider = JevProvider(client=c, model="jev-test")
        tone, billing, urgency = provider.decide_batch([TONE, BILLING, URGENCY], "charged twice!")
        assert len(stub.requests) == 1
        body = stub.requests[0]["body"]
        assert stub.requests[0]["path"] == "/v1/systemone"
        assert body["state"] == "charged twice!" and body["model"] == "jev-test"
        assert body["questions"]["q0"] == {"type": "choice", "instructions": TONE.prompt,
                                           "criteria": {"calm": "Calm and polite",
                                                        "angry": "Angry"}}
        assert body["questions"]["q1"] == {"type": "noul", "instructions": BILLING.prompt}
        assert body["questions"]["q2"]["criteria"] == ["Can wait", "This week", "Today"]
        assert isinstance(tone, ChoiceResult) and tone.distribution == {"calm": 0.5,
                                                                        "angry": 0.5}
        assert tone.confidence == 0.8 and tone.raw["request_id"] == "req-1"
        assert isinstance(billing, BooleanResult) and billing.p_true == 0.75
        assert isinstance(urgency, ScoreResult)
        assert urgency.distribution == {"low": 0.5, "mid": 0.25, "high": 0.25}
        assert urgency.vendor_score == 0.9 and urgency.confidence == 0.6
        assert urgency.expected_index == 0.25 + 2 * 0.25  # ours, not the vendor's 0.9
        results = provider.decide(TONE, ["one", "two", "three"])
        assert len(results) == 3 and len(stub.requests) == 4
        assert [r["body"]["state"] for r in stub.requests[1:]] == ["one", "two", "three"]


def test_the_sdk_retry_policy_owns_retries() -> None:
    with JevStub() as stub:
        stub.script = [(503, {"error": "busy"}, {}), (503, {"error": "busy"}, {})]
        retry = typesafe_sdk.RetryPolicy(max_retries=2, backoff_initial=0, backoff_max=0)
        with client(stub, retry) as c:
            result = JevProvider(client=c).decide_batch([TONE], "text")
        assert len(stub.requests) == 3 and result[0].raw["request_id"] == "req-3"


def test_failures_are_jev_errors_with_the_request_id() -> None:
    with JevStub() as stub, client(stub) as c:
        stub.script = [(400, {"error": "bad question"}, {})]
        with pytest.raises(JevError) as info:
            JevProvider(client=c).decide_batch([TONE], "text")
        assert info.value.request_id == "req-1" and info.value.status == 400
        assert "bad question" in str(info.value) and "req-1" in str(info.value)
        assert isinstance(info.value.__cause__, typesafe_sdk.TypeSafeBadRequestError)
        stub.script = [(500, {"error": "down"}, {})]
        with pytest.raises(JevError) as down:
            JevProvider(client=c).decide_batch([TONE], "text")
        assert down.value.request_id == "req-2" and down.value.status == 500
    # No response at all (the stub is gone): a JevError without a request id.
    with pytest.raises(JevError) as gone:
        JevProvider(client=client(stub)).decide_batch([TONE], "text")
    assert gone.value.request_id is None


def test_malformed_answers_are_refused_by_the_shared_validator() -> None:
    def off(body):
        return {"model": "m", "usage": {"input_tokens": 1, "output_tokens": 1},
                "answers": {"q0": {"type": "choice", "choice": "calm", "confidence": 0.9,
                                   "probabilities": {"calm": 0.6, "angry": 0.6}}}}

    def missing(body):
        return {"model": "m", "usage": {"input_tokens": 1, "output_tokens": 1}, "answers": {}}

    for reply, message in ((off, "never renormalized"), (missing, "no choice answer")):
        with JevStub(reply) as stub, client(stub) as c, pytest.raises(
                InvalidDecisionResponse, match=message):
            JevProvider(client=c).decide_batch([TONE], "text")


def test_injected_clients_are_never_closed_owned_ones_are() -> None:
    with JevStub() as stub:
        borrowed = client(stub)
        with JevProvider(client=borrowed) as provider:
            provider.decide_batch([TONE], "text")
        assert not borrowed._http_client.is_closed
        JevProvider(client=borrowed).decide_batch([TONE], "again")
        borrowed.close()
        owned = JevProvider(api_key="test-key", base_url=stub.url, compression=False,
                            retry=NO_RETRY)
        owned.decide_batch([TONE], "text")
        owned.close()
        assert owned.client._http_client.is_closed


def test_a_job_batches_jev_requests_by_max_questions_and_refuses_token_caps() -> None:
    with JevStub() as stub, client(stub) as c:
        provider = JevProvider(client=c, max_questions=2)
        job = Job.collect({k: Job.ask(q, id=k) for k, q in
                           (("tone", TONE), ("billing", BILLING), ("urgency", URGENCY))})
        result = job.run(provider, state="I was charged twice")
        assert len(stub.requests) == 2 and result.calls == (("tone", "billing"), ("urgency",))
        with pytest.raises(UnsupportedCapability, match="max_tokens"):
            job.run(provider, state="x", limits=Limits(max_tokens=50))
        assert len(stub.requests) == 2
