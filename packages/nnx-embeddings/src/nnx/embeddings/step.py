"""``text_contrastive_train_step_factory``: paired text views → NT-Xent (spec §10.2, §16).

A batch is ``(texts_a, texts_b)``: two equally long sequences of strings whose i-th
entries are two views of one item (a question and its passage, a title and its
abstract, two phrasings). Each view is tokenized, forwarded through the model's own
training forward (``ctx.forward``: the step context's path, DDP wrapper included) and
pooled to one embedding per text; NT-Xent treats every other text of the batch as a
negative. The update commits through ``finalize_step`` as every NNx step factory does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from nnx import NNEvaluationDataPoint, TrainStepContext
from nnx.embeddings.contrastive import nt_xent
from nnx.embeddings.pooling import pool
from nnx.embeddings.tokens import check_texts, encode_texts, resolve_tokenizer
from nnx.extend import (
    POSITIVE,
    check_optional_count,
    check_real,
    finalize_step,
    full_precision_only,
    imperative_step,
    train_mode,
)

__all__ = ["text_contrastive_train_step_factory"]

_WHO = "text_contrastive_train_step_factory"


def text_pairs(batch: Any, who: str) -> tuple[list[str], list[str]]:
    """The two views of a ``(texts_a, texts_b)`` batch, checked."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        size = f" of length {len(batch)}" if isinstance(batch, (tuple, list)) else ""
        raise ValueError(f"{who} needs (texts_a, texts_b) batches; got "
                         f"{type(batch).__name__}{size}")
    a = check_texts(batch[0], who, name="texts_a")
    b = check_texts(batch[1], who, name="texts_b")
    if len(a) != len(b):
        raise ValueError(f"{who}: texts_a has {len(a)} texts and texts_b {len(b)}; each text "
                         "needs its paired view")
    return a, b


def _embed_view(ctx: TrainStepContext, tok: Any, texts: list[str],
                max_length: int | None) -> torch.Tensor:
    ids, lengths = encode_texts(tok, texts, max_length, _WHO)
    device = ctx.model.device
    return pool(ctx.forward((ids.to(device),)), lengths.to(device), _WHO)


def text_contrastive_train_step_factory(
        *, tokenizer: Any = None, temperature: float = 0.5,
        max_length: int | None = None) -> Callable[[TrainStepContext], NNEvaluationDataPoint]:
    """A ``train_step_fn`` training ``model.net`` (token ids → embeddings) with NT-Xent
    on ``(texts_a, texts_b)`` batches. ``tokenizer=None`` uses ``model.tokenizer``."""
    t = float(check_real(f"{_WHO} temperature", temperature, POSITIVE))
    limit = check_optional_count(f"{_WHO} max_length", max_length)
    if tokenizer is not None:
        resolve_tokenizer(None, tokenizer, _WHO)  # refuse a non-tokenizer before training
    loss_fn = nt_xent(_WHO)

    @full_precision_only
    @imperative_step
    def text_contrastive_train_step(ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        a, b = text_pairs(ctx.batch, _WHO)
        tok = resolve_tokenizer(ctx.model, tokenizer, _WHO)
        # Two forwards, as SimCLR's step: BatchNorm-like layers see one view at a time.
        z1 = _embed_view(ctx, tok, a, limit)
        z2 = _embed_view(ctx, tok, b, limit)
        loss = loss_fn(z1.float(), z2.float(), temperature=t)
        # A contrastive loss has no error: BEST and the plateau fall back to the loss.
        return NNEvaluationDataPoint(loss=finalize_step(ctx, loss).loss)

    text_contrastive_train_step.temperature = t  # type: ignore[attr-defined]
    return text_contrastive_train_step
