"""How a causal-LM batch becomes (inputs, targets, valid positions) (spec §15).

Kept apart from the task so that the objective, the evaluation and the
pre-training scan of the loaders read a batch through one function: they can
never disagree about which positions count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["LMBatch", "split_batch"]

_INPUT_KEYS = ("input_ids", "inputs")
_TARGET_KEYS = ("labels", "targets")


@dataclass(frozen=True)
class LMBatch:
    """One batch, aligned: ``inputs`` and ``targets`` are ``(batch, seq)``; ``valid``
    is the boolean mask of the positions the objective, NLL and accuracy count."""

    inputs: Tensor
    targets: Tensor
    valid: Tensor


def _first(batch: Mapping[str, Any], keys: Sequence[str]) -> Any:
    for key in keys:
        if key in batch:
            return batch[key]
    return None


def _parts(batch: Any) -> tuple[Tensor, Any, Any, Any]:
    """(ids, targets or None, attention_mask or None, loss_mask or None)."""
    if isinstance(batch, Tensor):
        return batch, None, None, None
    if isinstance(batch, Mapping):
        ids = _first(batch, _INPUT_KEYS)
        if ids is None:
            raise ValueError(f"a causal-LM mapping batch needs 'input_ids'; got keys "
                             f"{sorted(map(str, batch))}")
        return (ids, _first(batch, _TARGET_KEYS), batch.get("attention_mask"),
                batch.get("loss_mask"))
    if isinstance(batch, (tuple, list)) and 1 <= len(batch) <= 3:
        ids, *rest = batch
        targets = rest[0] if rest else None
        loss_mask = rest[1] if len(rest) > 1 else None
        return ids, targets, None, loss_mask
    raise ValueError("a causal-LM batch is a (batch, seq) id tensor, (ids[, targets[, "
                     f"loss_mask]]) or a mapping with 'input_ids'; got {type(batch).__name__}")


def _ids(name: str, value: Any) -> Tensor:
    if not isinstance(value, Tensor) or value.dim() != 2:
        shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ValueError(f"causal-LM {name} must be a (batch, seq) tensor; got {shape}")
    if value.dtype.is_floating_point or value.dtype == torch.bool or value.is_complex():
        raise ValueError(f"causal-LM {name} must hold integer token ids; got {value.dtype}")
    return value


def _mask(name: str, value: Any, shape: torch.Size) -> Tensor | None:
    if value is None:
        return None
    if not isinstance(value, Tensor) or value.shape != shape:
        got = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ValueError(f"causal-LM {name} must have the ids' shape {tuple(shape)}; got {got}")
    return value.bool()


def _refuse_left_padding(attention: Tensor) -> None:
    # A row is left padded when a 0 precedes a 1: the running max of the row
    # reaches 1 only after the first real token, so any 0 after it is fine
    # (right padding) and any 0 before a later 1 is not.
    later_real = attention.flip(1).cummax(1).values.flip(1)
    if bool((later_real & ~attention).any()):
        rows = sorted({int(r) for r in (later_real & ~attention).nonzero()[:, 0]})
        raise ValueError(f"left padding in rows {rows} of a causal-LM batch: the model never "
                         "sees the attention mask, so pad on the right")


def split_batch(batch: Any, *, alignment: str, vocab_size: int, ignore_id: int,
                pad_id: int | None) -> LMBatch:
    """Align ``batch`` and mark its valid positions; raise ``ValueError`` on a bad batch."""
    ids, targets, attention, loss_mask = _parts(batch)
    ids = _ids("input ids", ids)
    attention = _mask("attention_mask", attention, ids.shape)
    loss_mask = _mask("loss_mask", loss_mask, ids.shape)
    if attention is not None:
        _refuse_left_padding(attention)
    if alignment == "shift_inputs":
        if targets is not None:
            raise ValueError("alignment='shift_inputs' takes the targets from the inputs; this "
                             "batch carries its own (use alignment='pre_shifted')")
        inputs, targets = ids[:, :-1], ids[:, 1:]
        # Every mask follows the target it guards: position t predicts token t + 1.
        attention = None if attention is None else attention[:, 1:]
        loss_mask = None if loss_mask is None else loss_mask[:, 1:]
    else:
        if targets is None:
            raise ValueError("alignment='pre_shifted' needs batches carrying their targets: "
                             "(inputs, targets) or a mapping with 'labels'")
        inputs, targets = ids, _ids("targets", targets)
        if targets.shape != inputs.shape:
            raise ValueError(f"pre-shifted targets must have the inputs' shape "
                             f"{tuple(inputs.shape)}; got {tuple(targets.shape)}")
    valid = targets != ignore_id
    if pad_id is not None:
        valid &= targets != pad_id
    for mask in (attention, loss_mask):
        if mask is not None:
            valid &= mask
    bad = valid & ((targets < 0) | (targets >= vocab_size))
    if bool(bad.any()):
        raise ValueError(f"causal-LM targets must be token ids in [0, {vocab_size}) or "
                         f"ignore_id={ignore_id}; got {int(targets[bad][0])}")
    return LMBatch(inputs=inputs, targets=targets, valid=valid)
