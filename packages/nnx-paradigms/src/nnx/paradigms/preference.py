"""NNPreferenceDataset (spec §15, docs/dpo.md): (prompt, chosen, rejected) token-id triples.

Each triple is three non-empty token-id sequences (lists of ints or 1-D integer
tensors) in ``[0, vocab_size)``. The pad id is declared and never appears inside
content, so a batch's padding is exactly its pad positions: ``.loader(batch_size)``
right-pads each part of a batch to its longest row with it, the layout
``dpo_train_step_factory`` reads. Everything is checked at construction, naming the
triple and the part, before any optimizer exists.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from nnx.extend import check_count, require_distribution

__all__ = ["NNPreferenceDataset", "PreferenceBatch", "right_pad"]

#: One batch: right-padded ``(B, L_prompt)``, ``(B, L_chosen)``, ``(B, L_rejected)`` ids.
PreferenceBatch = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
_PARTS = ("prompt", "chosen", "rejected")


def _ids(where: str, seq: Any, vocab_size: int, pad_id: int) -> torch.Tensor:
    if isinstance(seq, torch.Tensor):
        if seq.dim() != 1 or seq.is_floating_point() or seq.is_complex() or (
                seq.dtype == torch.bool):
            raise ValueError(f"{where} must be a 1-D integer tensor of token ids; got "
                             f"{seq.dtype} of shape {tuple(seq.shape)}")
        ids = seq.detach().to("cpu", torch.long)
    elif isinstance(seq, (list, tuple)):
        if not all(isinstance(t, int) and not isinstance(t, bool) for t in seq):
            raise ValueError(f"{where} must hold integer token ids; got {list(seq)[:8]!r}")
        ids = torch.tensor(list(seq), dtype=torch.long)
    else:
        raise ValueError(f"{where} must be a list of token ids or a 1-D tensor; got "
                         f"{type(seq).__name__}")
    if ids.numel() == 0:
        raise ValueError(f"{where} is empty: every prompt and completion needs >= 1 token")
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise ValueError(f"{where} has token ids outside [0, {vocab_size}): min "
                         f"{int(ids.min())}, max {int(ids.max())}")
    at = (ids == pad_id).nonzero()
    if at.numel():
        raise ValueError(f"{where} contains the pad id {pad_id} at position {int(at[0])}: "
                         "the pad id marks padding only, so it cannot appear in content")
    return ids


def right_pad(rows: Sequence[torch.Tensor], pad_id: int) -> torch.Tensor:
    """``rows`` stacked into ``(B, longest)``, each right-padded with ``pad_id``."""
    out = torch.full((len(rows), max(len(r) for r in rows)), pad_id, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = r
    return out


class NNPreferenceDataset(Dataset[PreferenceBatch]):
    """Preference triples for DPO; ``dataset[i]`` is the i-th (prompt, chosen, rejected)."""

    def __init__(self, triples: Sequence[Sequence[Any]], *, pad_id: int,
                 vocab_size: int) -> None:
        require_distribution("nnx-lm", "nnx.lm", needed_by="NNPreferenceDataset")
        self.vocab_size = check_count("NNPreferenceDataset vocab_size", vocab_size, minimum=1)
        self.pad_id = check_count("NNPreferenceDataset pad_id", pad_id, minimum=0,
                                  maximum=self.vocab_size - 1)
        if isinstance(triples, (str, bytes)) or not isinstance(triples, Sequence):
            raise ValueError(f"NNPreferenceDataset needs a sequence of (prompt, chosen, "
                             f"rejected) triples; got {type(triples).__name__}")
        if len(triples) == 0:
            raise ValueError("NNPreferenceDataset needs at least one triple")
        rows: list[PreferenceBatch] = []
        for i, triple in enumerate(triples):
            if isinstance(triple, (str, bytes)) or not isinstance(triple, Sequence) or (
                    len(triple) != 3):
                raise ValueError(f"triples[{i}] must be (prompt, chosen, rejected); got "
                                 f"{triple!r:.80}")
            p, c, r = (_ids(f"triples[{i}].{part}", seq, self.vocab_size, self.pad_id)
                       for part, seq in zip(_PARTS, triple, strict=True))
            rows.append((p, c, r))
        self.rows = tuple(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> PreferenceBatch:
        return self.rows[index]

    def collate(self, items: Sequence[PreferenceBatch]) -> PreferenceBatch:
        """Right-pad each part of ``items`` with the pad id (the loader's collate_fn)."""
        prompt, chosen, rejected = (right_pad([it[k] for it in items], self.pad_id)
                                    for k in range(3))
        return prompt, chosen, rejected

    def loader(self, batch_size: int, *, shuffle: bool = False,
               generator: torch.Generator | None = None) -> DataLoader[PreferenceBatch]:
        """A DataLoader of right-padded ``(prompt, chosen, rejected)`` batches."""
        size = check_count("NNPreferenceDataset.loader batch_size", batch_size, minimum=1)
        return DataLoader(self, batch_size=size, shuffle=shuffle, generator=generator,
                          collate_fn=self.collate)

    def __repr__(self) -> str:
        return (f"NNPreferenceDataset({len(self)} triples, pad_id={self.pad_id}, "
                f"vocab_size={self.vocab_size})")
