"""``expand_embedding``: an ``nn.Embedding`` with more rows (spec §16).

Old rows are kept bit for bit. Each new row is the mean of the old rows (the padding
row left out): a deterministic start (no RNG stream moves) on the scale of the learned
rows, so a new token looks like an average known one until it is trained. On nnx-lm's
TransformerNN the output head grows with it and the params record the new vocabulary
(:mod:`nnx.surgery.vocab`).
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from nnx import NNParams
from nnx.extend import check_count
from nnx.surgery.errors import SurgeryShapeError, SurgeryTargetError
from nnx.surgery.sites import find_module, swap
from nnx.surgery.vocab import check_token_embedding, grown_transformer, is_transformer

__all__ = ["expand_embedding"]


def _grown(old: nn.Embedding, rows: int) -> nn.Embedding:
    weight = old.weight.detach()
    keep = torch.ones(old.num_embeddings, dtype=torch.bool, device=weight.device)
    if old.padding_idx is not None:
        keep[old.padding_idx] = False
    learned = weight[keep]
    fill = (learned.mean(dim=0) if len(learned) else torch.zeros_like(weight[0]))
    new = nn.Embedding(rows, old.embedding_dim, padding_idx=old.padding_idx,
                       max_norm=old.max_norm, norm_type=old.norm_type,
                       scale_grad_by_freq=old.scale_grad_by_freq, sparse=old.sparse,
                       device="meta", dtype=weight.dtype).to_empty(device=weight.device)
    with torch.no_grad():
        new.weight[:old.num_embeddings] = weight
        new.weight[old.num_embeddings:] = fill
    new.weight.requires_grad_(old.weight.requires_grad)
    return new.train(old.training)


def expand_embedding(net: nn.Module, *, layer_name: str,
                     new_num_embeddings: int) -> nn.Module:
    """A copy of ``net`` whose ``nn.Embedding`` ``layer_name`` has ``new_num_embeddings``
    rows: rows ``[0, n)`` as they were, each new row the mean of the old non-padding
    rows (zeros when there are none). ``padding_idx``, ``max_norm``, ``sparse`` and the
    other settings, the weight's requires_grad and the module's mode are kept.

    On nnx-lm's ``TransformerNN`` (``layer_name="embed"``, its token embedding) the
    output head grows too: tied, it is the grown table; untied, ``lm_head`` gets the new
    rows, each the mean of its old rows. The copy's params have ``vocab_size =
    new_num_embeddings`` (docs/surgery.md); the tokenizer is the caller's to extend.

    Refusals, before anything is copied: SurgeryTargetError (no such module, not exactly
    an ``nn.Embedding``, aliased or tied, e.g. to an output head; on a TransformerNN a
    ``layer_name`` other than ``"embed"`` or a head that is not the params'; any other
    NNx built-in net, whose params record no vocabulary to rewrite),
    SurgeryShapeError (``new_num_embeddings`` not larger).
    """
    # Only a built-in net's params can make it a TransformerNN: a plain module never
    # imports nnx-lm here.
    builtin = isinstance(getattr(net, "params", None), NNParams)
    transformer = builtin and is_transformer(net)
    if transformer:
        check_token_embedding(layer_name)
    elif builtin:
        raise SurgeryTargetError(
            f"expand_embedding: {type(net).__name__} is an NNx built-in net whose params "
            f"expand_embedding does not rewrite; expand a plain module's embedding or an "
            f"nnx-lm TransformerNN's")
    embedding = find_module(net, layer_name, "expand_embedding")
    if type(embedding) is not nn.Embedding:
        raise SurgeryTargetError(f"expand_embedding: {layer_name!r} is a "
                                 f"{type(embedding).__name__}, not an nn.Embedding")
    rows = check_count("expand_embedding new_num_embeddings", new_num_embeddings)
    if rows <= embedding.num_embeddings:
        raise SurgeryShapeError(f"expand_embedding: {layer_name!r} has "
                                f"{embedding.num_embeddings} rows; new_num_embeddings must "
                                f"be larger (got {rows})")
    if transformer:
        return grown_transformer(net, embedding, rows, _grown)
    grown = _grown(embedding, rows)
    memo = {id(embedding): embedding}  # the old table is replaced, never copied
    return swap(copy.deepcopy(net, memo=memo), layer_name, grown)
