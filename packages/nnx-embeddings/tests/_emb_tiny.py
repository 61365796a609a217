"""A word tokenizer, a tiny embedder net and a synonym retrieval task for the tests."""

from __future__ import annotations

import random

import torch
from torch import nn

from nnx import Devices, NNModel, NNModelParams


class WordTokenizer:
    """Whitespace words → ids (0 pads, 1 is an unknown word)."""

    pad_id = 0

    def __init__(self, words: list[str]) -> None:
        self.vocab = {w: i + 2 for i, w in enumerate(sorted(set(words)))}

    def encode(self, text: str) -> list[int]:
        return [self.vocab.get(w, 1) for w in text.split()]


class BagEncoder(nn.Module):
    """Token ids (B, L) → token states (B, L, D): embed_texts mean-pools them."""

    def __init__(self, vocab: int, dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.drop = nn.Dropout(0.1)
        self.proj = nn.Linear(dim, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.drop(self.embed(ids)))


class Counting(BagEncoder):
    """A BagEncoder that counts its forwards: a refusal must come before the first."""

    calls = 0

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        Counting.calls += 1
        return super().forward(ids)


def embedder(vocab: int, seed: int = 0, dim: int = 16) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(module=BagEncoder(vocab, dim), params=NNModelParams(device=Devices.CPU))


def synonym_task(n_concepts: int = 40, words_per_text: int = 4, n_train: int = 400,
                 n_held_out: int = 100, seed: int = 0):
    """Each concept c is written ``a<c>`` in documents and ``b<c>`` in queries, so an
    untrained embedder cannot match them; a held-out document is a new combination of
    concepts. Returns (tokenizer, training pairs, held-out docs, held-out queries)."""
    rng = random.Random(seed)
    words = [f"a{c}" for c in range(n_concepts)] + [f"b{c}" for c in range(n_concepts)]

    def pair() -> tuple[str, str]:
        concepts = rng.sample(range(n_concepts), words_per_text)
        return (" ".join(f"a{c}" for c in concepts),
                " ".join(f"b{c}" for c in rng.sample(concepts, len(concepts))))

    train = [pair() for _ in range(n_train)]
    held = [pair() for _ in range(n_held_out)]
    return WordTokenizer(words), train, [d for d, _ in held], [q for _, q in held]


def recall_at_1(queries: torch.Tensor, docs: torch.Tensor) -> float:
    """Share of queries whose nearest document (inner product) is their own."""
    hits = (queries @ docs.T).argmax(dim=1) == torch.arange(len(queries))
    return float(hits.float().mean())
