"""``expand_embedding`` on nnx-lm's ``TransformerNN``: a larger vocabulary (spec §16).

The token embedding grows as a plain one does (old rows bit for bit, new rows the mean
of the old ones), and the output projection with it: tied (``lm_head`` None, the logits
read the embedding) it is the grown table itself; untied, ``lm_head`` gains the same
number of rows, each the mean of its old rows (a bias, if any, the mean of the old
entries). So an old token's hidden states are unchanged, the old tokens' logits are
too, and each new token's logit is the mean of the old logits at that position: never
above the largest, so greedy picks among the old tokens stay the same. The params get
the new ``vocab_size``, so ``NNModel(net_params=new.params)`` builds exactly the result.

transformers' ``resize_token_embeddings`` (``mean_resizing=True``) samples new rows
from a normal with the old rows' mean and covariance; the mean alone is its
expectation, and deterministic: no RNG stream moves.

nnx-surgery does not require nnx-lm: a net that is a TransformerNN came from an
installed nnx-lm, reached here through core's ``require_distribution``.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from nnx.extend import MissingDistributionError, require_distribution
from nnx.surgery.errors import SurgeryTargetError
from nnx.surgery.sites import check_unaliased

__all__ = ["check_token_embedding", "grown_transformer", "is_transformer"]

_OP = "expand_embedding"
_EMBED, _HEAD = "embed", "lm_head"


def is_transformer(net: nn.Module) -> bool:
    """Whether ``net`` is exactly nnx-lm's TransformerNN (a subclass may compute its
    logits otherwise); False without nnx-lm, where no net can be one."""
    try:
        lm = require_distribution("nnx-lm", "nnx.lm", needed_by=_OP)
    except MissingDistributionError:
        return False
    return type(net) is lm.TransformerNN


def _head(net: Any) -> nn.Linear | None:
    """The untied output projection, None when tied; SurgeryTargetError when it is not
    what the params build (a wrapped or aliased head would not grow with the vocabulary)."""
    head = net.lm_head
    tied = net.params.tie_embeddings
    if head is None and tied:
        return None
    if tied or head is None:
        raise SurgeryTargetError(
            f"{_OP}: the TransformerNN's lm_head ({type(head).__name__}) does not match its "
            f"params (tie_embeddings={tied})")
    if type(head) is not nn.Linear:
        raise SurgeryTargetError(f"{_OP}: the TransformerNN's lm_head is a "
                                 f"{type(head).__name__}, not an nn.Linear; merge or remove "
                                 f"the wrapper first")
    check_unaliased(net, head, _HEAD, _OP)
    return head


def _grown_head(old: nn.Linear, rows: int) -> nn.Linear:
    weight, bias = old.weight.detach(), old.bias
    # Meta, then empty storage: no default init runs (no RNG stream moves).
    new = nn.Linear(old.in_features, rows, bias=bias is not None, device="meta",
                    dtype=weight.dtype).to_empty(device=weight.device)
    with torch.no_grad():
        new.weight[:old.out_features] = weight
        new.weight[old.out_features:] = weight.mean(dim=0)
        if bias is not None:
            new.bias[:old.out_features] = bias
            new.bias[old.out_features:] = bias.detach().mean()
    new.weight.requires_grad_(old.weight.requires_grad)
    if bias is not None:
        new.bias.requires_grad_(bias.requires_grad)
    return new.train(old.training)


def check_token_embedding(layer_name: str) -> None:
    """On a TransformerNN only its token embedding grows (the head follows it)."""
    if layer_name != _EMBED:
        raise SurgeryTargetError(
            f"{_OP}: on a TransformerNN, layer_name must be its token embedding "
            f"{_EMBED!r} (the output head grows with it); got {layer_name!r}")


def grown_transformer(net: Any, embedding: nn.Embedding, rows: int,
                      grow: Callable[[nn.Embedding, int], nn.Embedding]) -> nn.Module:
    """A copy of TransformerNN ``net`` with ``rows`` tokens; ``embedding`` is its checked
    token embedding and ``grow(embedding, rows)`` grows it as for any net. The head is
    checked (SurgeryTargetError) before anything is copied."""
    head = _head(net)
    new_embedding = grow(embedding, rows)
    new_head = None if head is None else _grown_head(head, rows)
    memo = {id(embedding): embedding, id(head): head}  # replaced, never copied
    out = copy.deepcopy(net, memo=memo)
    out.embed = new_embedding
    if new_head is not None:
        out.lm_head = new_head
    # input_dim / output_dim are derived from vocab_size when left unset.
    out.params = dataclasses.replace(net.params, vocab_size=rows, input_dim=None, output_dim=0)
    return out  # type: ignore[no-any-return]
