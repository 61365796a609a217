"""A batch of stored teacher distributions, and the student's logits on one (spec §10.1).

The piece the dataset, the objective and the report all read: :class:`TeacherBatch`
(what ``TeacherDataset.loader`` yields), :func:`student_logits` (the student's checked
logits of a batch) and :func:`imitation_sums` (KL(teacher ‖ student) per row). Kept in
its own module so those three import it, never each other in a circle.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

__all__ = ["UNLABELLED", "TeacherBatch", "imitation_sums", "student_logits"]

UNLABELLED = -1  # the label index of an unlabelled row


@dataclass(frozen=True, eq=False)
class TeacherBatch:
    """A batch of a TeacherDataset: inputs, the aligned teacher probabilities, the label
    indices (``-1`` unlabelled) and the candidate order the columns follow."""

    inputs: torch.Tensor
    probabilities: torch.Tensor
    labels: torch.Tensor
    candidates: tuple[str, ...]
    sample_ids: tuple[str, ...]

    def __len__(self) -> int:
        return int(self.inputs.shape[0])

    def __iter__(self) -> Iterator[Any]:
        # Not an (X, Y) batch: a live-logit path unpacking it fails here, clearly.
        raise TypeError("a TeacherBatch holds stored teacher probabilities, not an (X, Y) "
                        "batch: train it with objective=dataset.objective(alpha)")

    @property
    def labelled(self) -> torch.Tensor:
        """The row mask of labelled rows."""
        return self.labels != UNLABELLED


def student_logits(model: Any, batch: Any, candidates: tuple[str, ...], who: str,
                   forward: Any = None) -> torch.Tensor:
    """The student's float32 logits of a checked TeacherBatch, shaped (rows, candidates)."""
    if not isinstance(batch, TeacherBatch):
        raise TypeError(f"{who} needs TeacherDataset batches (dataset.loader(...)); got "
                        f"{type(batch).__name__}")
    if batch.candidates != candidates:
        raise ValueError(f"{who}: the batch's candidate order {batch.candidates} is not this "
                         f"objective's {candidates}")
    x = batch.inputs.to(model.device)
    raw = forward((x,)) if forward is not None else model.forward_raw((x,))
    out: torch.Tensor = raw.float()
    if out.dim() != 2 or out.shape[1] != len(candidates):
        raise ValueError(f"{who}: the student's output {tuple(out.shape)} must be (rows, "
                         f"{len(candidates)}), one logit per candidate")
    return out


def imitation_sums(logits: torch.Tensor, probabilities: torch.Tensor) -> torch.Tensor:
    """KL(q ‖ softmax(logits)) per row (0 · log 0 = 0), q detached."""
    q = probabilities.detach().to(logits.device, torch.float32)
    return (torch.xlogy(q, q) - q * F.log_softmax(logits, dim=1)).sum(dim=1)
