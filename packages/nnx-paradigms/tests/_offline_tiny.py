"""Tiny teacher records and datasets shared by the offline-distillation tests."""

from __future__ import annotations

from typing import Any

import torch

from nnx.paradigms.offline_distillation import TeacherDataset, TeacherRecord

CANDIDATES = ("cat", "dog", "fox")
DIGEST = "schema-1"
PROVENANCE = {"source": "export-2026-01", "training_rights": "internal-research"}


def record(sample_id: str = "s0", candidates: tuple[str, ...] = CANDIDATES,
           probabilities: tuple[float, ...] = (0.5, 0.3, 0.2), **overrides: Any) -> TeacherRecord:
    fields: dict[str, Any] = dict(sample_id=sample_id, question_id="q1", candidates=candidates,
                                  probabilities=probabilities, teacher="teacher-7b",
                                  revision="r3", schema_digest=DIGEST, semantics="predictive",
                                  provenance=dict(PROVENANCE))
    fields.update(overrides)
    return TeacherRecord(**fields)


def records(n: int = 5, seed: int = 0, shuffle_order: bool = True) -> list[TeacherRecord]:
    """n records; odd ones list the candidates in another order (alignment is by id)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):
        p = torch.softmax(torch.randn(3, generator=g, dtype=torch.float64), 0).tolist()
        order = [2, 0, 1] if (shuffle_order and i % 2) else [0, 1, 2]
        out.append(record(f"s{i}", tuple(CANDIDATES[j] for j in order),
                          tuple(p[j] for j in order)))
    return out


def inputs(n: int = 5, seed: int = 1) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {f"s{i}": torch.randn(4, generator=g) for i in range(n)}


def labels(n: int = 5, every: bool = True) -> dict[str, str | None]:
    return {f"s{i}": (CANDIDATES[i % 3] if every or i % 2 == 0 else None) for i in range(n)}


def dataset(n: int = 5, labelled: str = "all", **kwargs: Any) -> TeacherDataset:
    given = None if labelled == "none" else labels(n, every=labelled == "all")
    return TeacherDataset(records(n), inputs(n), candidates=kwargs.pop("candidates", CANDIDATES),
                          schema_digest=DIGEST, labels=given, **kwargs)
