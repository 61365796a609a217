"""``embed_texts``: texts → one (L2-normalised) embedding each, batched, no autograd.

A §13.2 helper: the net runs in eval mode for the call and every submodule's own
train/eval flag is restored afterwards, also when the call raises (core's
``preserved_state``). Every text is checked and tokenized before the first forward,
so a bad text refuses the call before any work.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nnx.embeddings.pooling import pool
from nnx.embeddings.tokens import check_texts, encode_texts, resolve_tokenizer
from nnx.extend import check_count, check_optional_count, preserved_state

__all__ = ["embed_texts", "embedder_net"]


def embedder_net(model: Any, who: str) -> tuple[nn.Module, torch.device]:
    """The net and its device of an ``NNModel`` (``model.net``) or a bare ``nn.Module``."""
    if isinstance(model, nn.Module):
        first = next(model.parameters(), None)
        return model, (first.device if first is not None else torch.device("cpu"))
    net = getattr(model, "net", None)
    if not isinstance(net, nn.Module):
        raise TypeError(f"{who} needs an NNModel (with .net) or an nn.Module; got "
                        f"{type(model).__name__}")
    return net, torch.device(model.device)


def embed_texts(model: Any, texts: Sequence[str], *, tokenizer: Any = None,
                batch_size: int = 64, normalize: bool = True,
                max_length: int | None = None) -> torch.Tensor:
    """``(len(texts), D)`` float32 CPU embeddings of ``texts``, row i for text i.

    ``normalize=True`` (the default) scales each row to unit L2 norm, so an inner
    product is the cosine similarity. ``tokenizer=None`` uses ``model.tokenizer``.
    """
    who = "embed_texts"
    net, device = embedder_net(model, who)
    rows = check_texts(texts, who)
    size = check_count(f"{who} batch_size", batch_size)
    limit = check_optional_count(f"{who} max_length", max_length)
    if not isinstance(normalize, bool):
        raise TypeError(f"{who} normalize must be a bool; got {type(normalize).__name__}")
    tok = resolve_tokenizer(model, tokenizer, who)
    batches = [encode_texts(tok, rows[i:i + size], limit, who)
               for i in range(0, len(rows), size)]
    out = []
    with preserved_state(net, mode="eval"), torch.no_grad():
        for ids, lengths in batches:
            z = pool(net(ids.to(device)), lengths.to(device), who).float()
            out.append((F.normalize(z, dim=1) if normalize else z).cpu())
    return torch.cat(out)
