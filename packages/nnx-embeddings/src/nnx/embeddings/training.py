"""``train_contrastive``: train a domain text embedder on (anchor, positive) pairs.

The call shape (docs/embeddings.md): ``train_contrastive(model, pairs, n_epochs=,
batch_size=, ...)`` turns the pairs into a seeded, shuffled loader of
``(texts_a, texts_b)`` batches and runs ``model.train`` with
:func:`~nnx.embeddings.text_contrastive_train_step_factory`: an ordinary NNx run
(run directory, checkpoints, resume), whose step is NT-Xent on the two views. To feed
your own loader, pass that step factory to ``model.train`` yourself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import torch
from torch.utils.data import DataLoader, Dataset

from nnx import NNRun, NNTrainParams
from nnx.embeddings.embed import embedder_net
from nnx.embeddings.step import text_contrastive_train_step_factory, text_pairs
from nnx.embeddings.tokens import check_encodable, resolve_tokenizer
from nnx.extend import check_count, check_seed

__all__ = ["collate_pairs", "train_contrastive"]

_WHO = "train_contrastive"


def collate_pairs(rows: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """A list of ``(a, b)`` pairs as the ``(texts_a, texts_b)`` batch the step reads."""
    return [a for a, _ in rows], [b for _, b in rows]


def _check_pairs(pairs: Any) -> list[tuple[str, str]]:
    if isinstance(pairs, (str, bytes)) or not isinstance(pairs, Sequence):
        raise TypeError(f"{_WHO}: pairs must be a sequence of (text, text) pairs; got "
                        f"{type(pairs).__name__}")
    if len(pairs) < 2:
        # NT-Xent's negatives are the batch's other pairs: one pair teaches nothing.
        raise ValueError(f"{_WHO} needs at least 2 pairs; got {len(pairs)}")
    rows = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"{_WHO}: pairs[{i}] is not a (text, text) pair")
        rows.append((pair[0], pair[1]))
    text_pairs(collate_pairs(rows), _WHO)  # every text a string, before the run exists
    return rows


def train_contrastive(model: Any, pairs: Sequence[tuple[str, str]], *, n_epochs: int = 1,
                      batch_size: int = 32, tokenizer: Any = None, temperature: float = 0.5,
                      max_length: int | None = None, optim: Any = None, seed: int = 0,
                      **train_kwargs: Any) -> NNRun:
    """Train ``model.net`` (token ids → embeddings) with NT-Xent on ``pairs``; returns
    the run. Each batch holds ``batch_size`` pairs (reshuffled every epoch from
    ``seed``); every other pair of the batch is a negative. ``optim`` is an
    ``NNOptimParams`` (None: NNTrainParams' default); ``train_kwargs`` go to
    ``model.train`` (``root=``, ``verbose=``, ``callbacks=``, ...)."""
    if "train_step_fn" in train_kwargs or "objective" in train_kwargs:
        raise TypeError(f"{_WHO} owns the update (NT-Xent); give no train_step_fn / objective")
    embedder_net(model, _WHO)
    if not callable(getattr(model, "train", None)) or not hasattr(model, "net"):
        raise TypeError(f"{_WHO} needs an NNModel; got {type(model).__name__}")
    rows = _check_pairs(pairs)
    size = check_count(f"{_WHO} batch_size", batch_size)
    tok = resolve_tokenizer(model, tokenizer, _WHO)
    check_encodable(tok, [text for pair in rows for text in pair], _WHO)
    step = text_contrastive_train_step_factory(tokenizer=tokenizer, temperature=temperature,
                                               max_length=max_length)
    generator = torch.Generator().manual_seed(check_seed(f"{_WHO} seed", seed))
    # A list is a map-style dataset (len and indexing), which DataLoader's stubs do not say.
    dataset = cast("Dataset[tuple[str, str]]", rows)
    loader: DataLoader[tuple[str, str]] = DataLoader(
        dataset, batch_size=size, shuffle=True, generator=generator, collate_fn=collate_pairs)
    plan: dict[str, Any] = {"n_epochs": check_count(f"{_WHO} n_epochs", n_epochs),
                            "train_loader": loader, "seed": seed}
    if optim is not None:
        plan["optim"] = optim
    run: NNRun = model.train(NNTrainParams(**plan), train_step_fn=step, **train_kwargs)
    return run
