"""TeacherDataset (spec §10.1): records joined to inputs by sample id, aligned by candidate id.

``TeacherDataset(records, inputs, candidates=(...), schema_digest=..., labels=...)``:

* ``inputs`` maps each record's sample id to that sample's input tensor (no batch
  axis; every input the same shape and dtype). Inputs without a record are
  ignored, a record without an input is refused.
* ``candidates`` is the student's output order: output column ``i`` scores
  ``candidates[i]``. Each record's distribution is reordered onto it by candidate
  id, never by position, so a record listing ``("dog", "cat")`` trains the same
  as one listing ``("cat", "dog")``.
* ``labels`` (optional) maps a sample id to its true candidate id, or None for an
  unlabelled sample; a sample it does not name is unlabelled.

Everything is checked here, before any optimizer exists: a missing, unknown or
duplicate candidate, another schema digest, a repeated sample, a sample without
input, an unknown label. Batches are :class:`TeacherBatch` values carrying their
candidate order, which the objective and the evaluation check against their own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from nnx.extend import check_count, check_seed
from nnx.paradigms.offline_distillation.batch import UNLABELLED, TeacherBatch
from nnx.paradigms.offline_distillation.objective import OfflineDistillationObjective
from nnx.paradigms.offline_distillation.records import TeacherRecord
from nnx.paradigms.offline_distillation.scoring import offline_eval_step

__all__ = ["TeacherDataset", "TeacherDatasetError", "TeacherLoader"]

class TeacherDatasetError(ValueError):
    """Records, inputs, candidates and labels that cannot form a TeacherDataset."""


class _Rows(Dataset[int]):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> int:
        return index


class TeacherLoader(DataLoader[int]):
    """The loader of a TeacherDataset: yields :class:`TeacherBatch` values."""

    def __init__(self, dataset: TeacherDataset, batch_size: int, *, shuffle: bool,
                 generator: torch.Generator | None) -> None:
        self.teacher_dataset = dataset
        super().__init__(_Rows(len(dataset)), batch_size=batch_size, shuffle=shuffle,
                         generator=generator, collate_fn=dataset.batch)


class TeacherDataset:
    """Stored teacher distributions for a student whose outputs follow ``candidates``."""

    def __init__(self, records: Sequence[TeacherRecord], inputs: Mapping[str, torch.Tensor], *,
                 candidates: Sequence[str], schema_digest: str,
                 labels: Mapping[str, str | None] | None = None) -> None:
        self.candidates = _candidates(candidates)
        if not isinstance(schema_digest, str) or not schema_digest:
            raise TeacherDatasetError(f"schema_digest must be a non-empty string; got "
                                      f"{schema_digest!r:.60}")
        self.schema_digest = schema_digest
        records = list(records)
        if not records:
            raise TeacherDatasetError("TeacherDataset needs at least one record")
        index = {c: i for i, c in enumerate(self.candidates)}
        seen: set[str] = set()
        rows = []
        for n, record in enumerate(records):
            if not isinstance(record, TeacherRecord):
                raise TypeError(f"records[{n}] is a {type(record).__name__}, not a TeacherRecord "
                                "(read them with read_teacher_records)")
            rows.append(_aligned(record, index, self.schema_digest, seen))
        self.records = tuple(records)
        self.sample_ids = tuple(r.sample_id for r in records)
        self.inputs = _stack(self.sample_ids, inputs)
        self.probabilities = torch.tensor(rows, dtype=torch.float32)
        self.labels = _labels(self.sample_ids, labels, index)

    def __len__(self) -> int:
        return len(self.records)

    @property
    def labelling(self) -> str:
        """``"all"``, ``"none"`` or ``"partial"``: how many records carry a label."""
        count = int((self.labels != UNLABELLED).sum())
        return "all" if count == len(self) else "none" if count == 0 else "partial"

    def batch(self, rows: Sequence[int]) -> TeacherBatch:
        """The :class:`TeacherBatch` of the given row indices."""
        at = torch.as_tensor(list(rows), dtype=torch.long)
        return TeacherBatch(inputs=self.inputs[at], probabilities=self.probabilities[at],
                            labels=self.labels[at], candidates=self.candidates,
                            sample_ids=tuple(self.sample_ids[int(i)] for i in at))

    def loader(self, batch_size: int, *, shuffle: bool = False,
               seed: int | None = None) -> TeacherLoader:
        """A loader of :class:`TeacherBatch` values (shuffled by ``seed`` when asked)."""
        size = check_count("TeacherDataset.loader batch_size", batch_size)
        generator = None
        if shuffle:
            generator = torch.Generator().manual_seed(
                0 if seed is None else check_seed("TeacherDataset.loader seed", seed))
        return TeacherLoader(self, size, shuffle=shuffle, generator=generator)

    def objective(self, alpha: float) -> OfflineDistillationObjective:
        """``alpha · KL(teacher ‖ student) + (1 − alpha) · CE(student, label)``, refused
        for a partly labelled dataset, and for alpha < 1 without every record labelled."""
        return OfflineDistillationObjective(self.candidates, self.schema_digest, alpha,
                                            labelling=self.labelling)

    def eval_step(self) -> Any:
        """An ``eval_step_fn`` whose record loss is the imitation loss (whatever alpha),
        with ``label_accuracy`` / ``label_nll`` metrics over the labelled rows."""
        return offline_eval_step(self.candidates)

    def __repr__(self) -> str:
        return (f"TeacherDataset({len(self)} records, candidates={self.candidates}, "
                f"labelled={self.labelling})")


def _candidates(candidates: Sequence[str]) -> tuple[str, ...]:
    if isinstance(candidates, str) or not isinstance(candidates, Sequence) or not candidates:
        raise TeacherDatasetError(f"candidates must be a non-empty sequence of candidate ids "
                                  f"(the student's output order); got {candidates!r:.60}")
    out = tuple(candidates)
    if not all(isinstance(c, str) and c for c in out):
        raise TeacherDatasetError(f"candidate ids must be non-empty strings; got {out!r:.80}")
    repeated = sorted({c for c in out if out.count(c) > 1})
    if repeated:
        raise TeacherDatasetError(f"candidates lists {repeated} more than once")
    return out


def _aligned(record: TeacherRecord, index: Mapping[str, int], digest: str,
             seen: set[str]) -> list[float]:
    """The record's probabilities in the student's candidate order."""
    sid = record.sample_id
    if record.schema_digest != digest:
        raise TeacherDatasetError(f"record {sid!r} was made for schema {record.schema_digest!r}, "
                                  f"not this dataset's {digest!r}")
    if sid in seen:
        raise TeacherDatasetError(f"sample {sid!r} has more than one record")
    seen.add(sid)
    unknown = [c for c in record.candidates if c not in index]
    missing = [c for c in index if c not in record.candidates]
    if unknown or missing or len(record.candidates) != len(index):
        raise TeacherDatasetError(f"record {sid!r} does not cover the candidates one-to-one: "
                                  f"unknown {unknown}, missing {missing}")
    row = [0.0] * len(index)
    for c, p in zip(record.candidates, record.probabilities, strict=True):
        row[index[c]] = p
    return row


def _stack(sample_ids: Sequence[str], inputs: Mapping[str, torch.Tensor]) -> torch.Tensor:
    if not isinstance(inputs, Mapping):
        raise TeacherDatasetError(f"inputs must map each sample id to its input tensor; got "
                                  f"{type(inputs).__name__}")
    missing = [s for s in sample_ids if s not in inputs]
    if missing:
        raise TeacherDatasetError(f"{len(missing)} sample(s) have no input: {missing[:5]}")
    tensors = [inputs[s] for s in sample_ids]
    first = tensors[0]
    for sid, t in zip(sample_ids, tensors, strict=True):
        if not isinstance(t, torch.Tensor):
            raise TeacherDatasetError(f"the input of {sid!r} is a {type(t).__name__}, not a "
                                      "tensor")
        if t.shape != first.shape or t.dtype != first.dtype:
            raise TeacherDatasetError(f"the input of {sid!r} is {t.dtype} {tuple(t.shape)}; the "
                                      f"first is {first.dtype} {tuple(first.shape)}")
    return torch.stack([t.detach() for t in tensors])


def _labels(sample_ids: Sequence[str], labels: Mapping[str, str | None] | None,
            index: Mapping[str, int]) -> torch.Tensor:
    out = torch.full((len(sample_ids),), UNLABELLED, dtype=torch.long)
    if labels is None:
        return out
    if not isinstance(labels, Mapping):
        raise TeacherDatasetError(f"labels must map sample ids to candidate ids (or None); got "
                                  f"{type(labels).__name__}")
    known = set(sample_ids)
    strays = [s for s in labels if s not in known]
    if strays:
        raise TeacherDatasetError(f"labels name sample(s) without a record: {strays[:5]}")
    for row, sid in enumerate(sample_ids):
        label = labels.get(sid)
        if label is None:
            continue
        if label not in index:
            raise TeacherDatasetError(f"sample {sid!r} is labelled {label!r}, which is not a "
                                      f"candidate of {tuple(index)}")
        out[row] = index[label]
    return out
