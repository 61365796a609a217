"""Tiny seeded NNModels and a deterministic counting provider for the decision tests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

import nnx
from nnx.decisions import (
    Boolean,
    Capabilities,
    Choice,
    Limits,
    Question,
    Score,
    validate_response,
)


def classifier(outputs: int = 3, seed: int = 0, *, loss: nnx.Losses | None = None,
               task: nnx.TaskSpec | None = None) -> nnx.NNModel:
    """A tiny net; the default loss (cross-entropy) and no TaskSpec make it categorical."""
    torch.manual_seed(seed)
    extra: dict[str, Any] = {} if loss is None else {"loss": loss}
    return nnx.NNModel(nnx.NNParams(input_dim=4, output_dim=outputs, hidden_dims=(8,)),
                       nnx.NNModelParams(device=nnx.Devices.CPU, task=task, **extra))


def one_logit(seed: int = 0) -> nnx.NNModel:
    """A one-logit binary head: BCE-with-logits, no TaskSpec (its implicit task)."""
    return classifier(1, seed, loss=nnx.Losses.BINARY_CROSS_ENTROPY)


class Counting:
    """A deterministic provider: each question's answer depends on the question and the
    state only (never on what it is batched with); every call is recorded."""

    name = "counting"

    def __init__(self, max_questions: int | None = None, *, fail_on: str | None = None,
                 kinds: Sequence[str] = ("choice", "boolean", "score")) -> None:
        self.max_questions = max_questions
        self.fail_on = fail_on
        self.kinds = frozenset(kinds)
        self.calls: list[tuple[str, ...]] = []
        self.closed = False

    def capabilities(self) -> Capabilities:
        return Capabilities(self.kinds, max_questions=self.max_questions)

    def close(self) -> None:
        self.closed = True

    def _one(self, q: Question, state: Any) -> Any:
        from nnx.decisions import ProviderFailure  # a test helper: the error it raises

        if self.fail_on is not None and q.prompt == self.fail_on:
            raise ProviderFailure(f"{self.name}: refused {q.prompt!r}")
        # A stable pseudo-answer from the question's digest and the state.
        h = int(q.digest()[:8], 16) + sum(map(ord, str(state)))
        if isinstance(q, Boolean):
            return validate_response(q, (h % 7) / 8, provider=self.name)
        assert isinstance(q, (Choice, Score))
        weights = [(h >> i) % 5 + 1 for i in range(len(q.ids))]
        total = sum(weights)
        keyed = {i: w / total for i, w in zip(q.ids, weights, strict=True)}
        return validate_response(q, keyed, provider=self.name)

    def decide(self, question: Question, inputs: Any) -> tuple[Any, ...]:
        self.capabilities().check(question)
        return tuple(self._one(question, x) for x in inputs)

    def decide_batch(self, questions: Sequence[Question], state: Any, *,
                     limits: Limits | None = None) -> tuple[Any, ...]:
        self.calls.append(tuple(q.prompt for q in questions))
        return tuple(self._one(q, state) for q in questions)
