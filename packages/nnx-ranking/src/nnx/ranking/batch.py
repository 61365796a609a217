"""One ranking batch, parsed and checked before any forward (spec §24 "Rejected").

A batch is ``(features, query_ids, candidate_ids, relevance[, mask])`` or a mapping with
those keys. Query and candidate ids are host values (integers or strings; an integer
tensor is read back to Python ints), so a candidate's identity survives sorting, device
moves and reloads. ``mask`` marks the valid rows (True / 1); masked rows are padding: they
go through the scorer (so they need finite features) and count nowhere else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from nnx.ranking.errors import RankingBatchError

__all__ = ["KEYS", "RankingBatch", "parse_batch", "scorer_device"]

KEYS = ("features", "query_ids", "candidate_ids", "relevance", "mask")


@dataclass(frozen=True)
class RankingBatch:
    """The checked batch: ``valid`` is None when every row is valid."""

    features: torch.Tensor
    query_ids: list[Any]
    candidate_ids: list[Any]
    relevance: torch.Tensor  # int64, on the host
    valid: torch.Tensor | None  # bool, on the host

    def rows(self) -> list[int]:
        """The valid rows' positions."""
        if self.valid is None:
            return list(range(len(self.query_ids)))
        return [int(i) for i in torch.nonzero(self.valid).reshape(-1)]

    def scores(self, output: Any) -> torch.Tensor:
        """The scorer's output as one score per row, or a refusal."""
        n = len(self.query_ids)
        if not isinstance(output, torch.Tensor) or output.shape not in ((n,), (n, 1)):
            shape = tuple(output.shape) if isinstance(output, torch.Tensor) else type(output)
            raise RankingBatchError(f"the scorer must return one score per row, shape ({n},) "
                                    f"or ({n}, 1); got {shape}")
        return output.reshape(n)


def _ids(value: Any, what: str) -> list[Any]:
    if isinstance(value, torch.Tensor | np.ndarray):
        if value.ndim != 1 or value.dtype in (torch.bool, np.bool_) or not (
                (isinstance(value, torch.Tensor) and not value.is_floating_point()
                 and not value.is_complex()) or (isinstance(value, np.ndarray)
                                                 and value.dtype.kind in "iuU")):
            raise RankingBatchError(f"{what} must be a 1-D sequence of integers or strings; "
                                    f"got an array of {value.dtype}, shape {tuple(value.shape)}")
        value = value.tolist()
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise RankingBatchError(f"{what} must be a sequence of integers or strings; got "
                                f"{type(value).__name__}")
    out = [int(v) if isinstance(v, np.integer) else v for v in value]
    kinds = {type(v) for v in out}
    if kinds - {int, str} or len(kinds) > 1:
        raise RankingBatchError(f"{what} must all be integers or all strings (no mixed types); "
                                f"got {sorted(k.__name__ for k in kinds)}")
    return out


def _grades(value: Any, n: int, max_relevance: int) -> torch.Tensor:
    grades = torch.as_tensor(value) if not isinstance(value, torch.Tensor) else value
    if grades.dtype == torch.bool or grades.is_floating_point() or grades.is_complex():
        raise RankingBatchError(f"relevance grades must be integers 0..{max_relevance}; got "
                                f"{grades.dtype}")
    grades = grades.detach().to("cpu", torch.int64)
    if grades.shape != (n,):
        raise RankingBatchError(f"relevance must have one grade per row ({n}); got shape "
                                f"{tuple(grades.shape)}")
    if n and (int(grades.min()) < 0 or int(grades.max()) > max_relevance):
        raise RankingBatchError(f"relevance grades must lie in 0..{max_relevance}; got "
                                f"{int(grades.min())}..{int(grades.max())}")
    return grades


def _mask(value: Any, n: int) -> torch.Tensor | None:
    if value is None:
        return None
    mask = torch.as_tensor(value) if not isinstance(value, torch.Tensor) else value
    if mask.shape != (n,):
        raise RankingBatchError(f"mask must have one entry per row ({n}); got shape "
                                f"{tuple(mask.shape)}")
    if mask.dtype != torch.bool and (mask.is_floating_point() or mask.is_complex() or bool(
            ((mask != 0) & (mask != 1)).any())):
        raise RankingBatchError("mask must be boolean or 0/1 integers")
    valid = mask.detach().to("cpu").bool()
    return None if bool(valid.all()) else valid


def parse_batch(batch: Any, *, max_relevance: int) -> RankingBatch:
    """The batch checked: lengths, id types, grades, mask, and no candidate twice per query."""
    if isinstance(batch, Mapping):
        missing = [k for k in KEYS[:4] if k not in batch]
        if missing:
            raise RankingBatchError(f"a ranking batch mapping needs the keys {KEYS[:4]}; "
                                    f"missing {missing}")
        parts = [batch[k] for k in KEYS[:4]] + [batch.get("mask")]
    elif isinstance(batch, tuple | list) and len(batch) in (4, 5):
        parts = [*batch, None][:5]
    else:
        raise RankingBatchError("a ranking batch is (features, query_ids, candidate_ids, "
                                "relevance[, mask]) or a mapping with those keys")
    features = parts[0]
    if not isinstance(features, torch.Tensor) or features.ndim == 0:
        raise RankingBatchError("ranking features must be a tensor with one row per candidate")
    n = int(features.shape[0])
    query_ids, candidate_ids = _ids(parts[1], "query ids"), _ids(parts[2], "candidate ids")
    if not len(query_ids) == len(candidate_ids) == n:
        raise RankingBatchError(f"ranking rows disagree in length: {n} feature rows, "
                                f"{len(query_ids)} query ids, {len(candidate_ids)} candidate ids")
    out = RankingBatch(features, query_ids, candidate_ids, _grades(parts[3], n, max_relevance),
                       _mask(parts[4], n))
    seen: set[tuple[Any, Any]] = set()
    for i in out.rows():
        key = (query_ids[i], candidate_ids[i])
        if key in seen:
            raise RankingBatchError(f"candidate {key[1]!r} is listed twice for query {key[0]!r}")
        seen.add(key)
    return out


def scorer_device(model: Any) -> torch.device:
    """Where the model's net lives (the features go there; ids and grades stay on the host)."""
    for parameter in model.net.parameters():
        device: torch.device = parameter.device
        return device
    return torch.device("cpu")
