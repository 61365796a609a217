"""Train a domain text embedder and hand it to FAISS (nnx-embeddings, spec §16, §24).

A generated help-desk corpus: every document is written in the product's own terms
("reboot router firmware"), every question in the customers' words for the same
things ("restart modem software"). An embedder that has never seen the domain cannot
tell that "restart" means "reboot": it almost never retrieves the right document.
``train_contrastive`` trains it on (question, document) pairs with NT-Xent
(nnx-paradigms), and the held-out questions — new combinations, never seen in
training — find their documents.

The trained embedder is then exported with ``export_to_faiss``: a Flat index file
whose path comes back, and a ``.ids.json`` sidecar that maps FAISS positions to this
corpus' own document ids (``read_faiss_ids``). NNx manages no index: the mapping is
the caller's, as any retrieval stack (LangChain, LlamaIndex, Haystack, raw FAISS)
expects.

    uv run python examples/13_train_domain_embedder.py
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import faiss
import torch
from torch import nn

from nnx import Devices, NNModel, NNModelParams, NNOptimParams
from nnx.embeddings import embed_texts, export_to_faiss, read_faiss_ids, train_contrastive

# Product term → the customers' word for it.
TERMS = {
    "reboot": "restart", "router": "modem", "firmware": "software", "invoice": "bill",
    "refund": "money-back", "credential": "password", "outage": "downtime",
    "latency": "lag", "subscription": "plan", "cancel": "stop", "upgrade": "improve",
    "bandwidth": "speed", "account": "profile", "install": "setup", "device": "gadget",
    "warranty": "guarantee", "shipment": "delivery", "replace": "swap",
    "configure": "adjust", "display": "screen", "battery": "charge", "cable": "wire",
    "network": "wifi", "license": "permit", "backup": "copy", "storage": "space",
    "update": "patch", "login": "signin", "support": "help", "error": "problem",
}


class WordTokenizer:
    """Whitespace words → ids; 0 pads, 1 is an unknown word."""

    pad_id = 0

    def __init__(self, words: list[str]) -> None:
        self.vocab = {w: i + 2 for i, w in enumerate(sorted(set(words)))}

    def encode(self, text: str) -> list[int]:
        return [self.vocab.get(w, 1) for w in text.split()]


class Embedder(nn.Module):
    """Token ids (B, L) → token states (B, L, D); embed_texts averages the real tokens."""

    def __init__(self, vocab: int, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.proj(self.embed(ids))


def pairs(n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(question in the customers' words, document in the product's terms)."""
    out = []
    for _ in range(n):
        terms = rng.sample(sorted(TERMS), 4)
        question = [TERMS[t] for t in terms]
        rng.shuffle(question)
        out.append((" ".join(question), " ".join(terms)))
    return out


def recall_at_1(model: NNModel, tok: WordTokenizer, questions: list[str],
                docs: list[str]) -> float:
    q = embed_texts(model, questions, tokenizer=tok)
    d = embed_texts(model, docs, tokenizer=tok)
    return float(((q @ d.T).argmax(dim=1) == torch.arange(len(q))).float().mean())


def main() -> None:
    rng = random.Random(0)
    train, held_out = pairs(320, rng), pairs(100, rng)
    questions, docs = [q for q, _ in held_out], [d for _, d in held_out]
    tok = WordTokenizer(list(TERMS) + list(TERMS.values()))

    torch.manual_seed(0)
    model = NNModel(module=Embedder(len(tok.vocab) + 2), params=NNModelParams(device=Devices.CPU))
    before = recall_at_1(model, tok, questions, docs)

    with tempfile.TemporaryDirectory() as root:
        run = train_contrastive(model, train, n_epochs=4, batch_size=32, tokenizer=tok,
                                temperature=0.2, seed=0,
                                optim=NNOptimParams.builder().adam(max_lr=0.02).build(),
                                root=root, verbose=False)
        after = recall_at_1(model, tok, questions, docs)
        print(f"run {run.id}: NT-Xent {run.idps[0].train_edp.loss:.3f} -> "
              f"{run.idps[-1].train_edp.loss:.3f}")
        print(f"held-out recall@1: untrained {before:.2f}, trained {after:.2f}")
        assert after > before + 0.5

        # The corpus' own ids: FAISS returns positions, the sidecar maps them back.
        doc_ids = [f"kb-{i:03d}" for i in range(len(docs))]
        path = export_to_faiss(model, docs, Path(root) / "helpdesk.faiss", ids=doc_ids,
                               tokenizer=tok, index_type="flat")
        index, mapping = faiss.read_index(str(path)), read_faiss_ids(path)
        scores, positions = index.search(embed_texts(model, questions[:3], tokenizer=tok)
                                         .numpy(), 3)
        for question, row, score in zip(questions[:3], positions, scores, strict=True):
            print(f"  {question!r} -> {[mapping[p] for p in row]} "
                  f"(cosine {score[0]:.2f})")
        print(f"exported {index.ntotal} vectors to {path.name} "
              f"(+ {path.name}.ids.json, {path.name}.safetensors)")
        assert mapping[int(positions[0][0])] == doc_ids[0]


if __name__ == "__main__":
    main()
