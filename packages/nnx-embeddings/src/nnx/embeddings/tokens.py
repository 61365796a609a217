"""Texts to token tensors: the one tokenization path of training, embedding and export.

A tokenizer is any object with ``encode(text)`` returning token ids (a list of ints,
or an object with ``.ids`` as ``tokenizers.Tokenizer.encode`` returns) and, optionally,
a ``pad_id`` (nnx-lm's ``NNTokenizerParams`` is one). Without one, the model's own
``tokenizer`` attribute is used (a ``GenerativeNNModel`` carries one). Rows are
right-padded with ``pad_id`` (0 when the tokenizer has none); the true lengths travel
beside the ids, so pooling never reads padding as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from nnx.extend import check_optional_count

__all__ = ["check_encodable", "check_texts", "encode_texts", "resolve_tokenizer"]


def resolve_tokenizer(model: Any, tokenizer: Any, who: str) -> Any:
    """``tokenizer``, else the model's ``tokenizer``; TypeError when neither encodes."""
    tok = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tok is None:
        raise TypeError(f"{who} needs tokenizer= (an object with encode(text) -> ids) when the "
                        f"model ({type(model).__name__}) carries no tokenizer")
    if not callable(getattr(tok, "encode", None)):
        raise TypeError(f"{who}: the tokenizer must have encode(text) -> token ids; got "
                        f"{type(tok).__name__}")
    return tok


def check_texts(texts: Any, who: str, *, name: str = "texts") -> list[str]:
    """``texts`` as a list of strings: a non-empty sequence (never one bare string)."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Sequence):
        raise TypeError(f"{who}: {name} must be a sequence of strings; got "
                        f"{type(texts).__name__}")
    if len(texts) == 0:
        raise ValueError(f"{who}: {name} is empty")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{who}: {name}[{i}] is {type(text).__name__}, not a string")
    return list(texts)


def _ids(tok: Any, text: str, who: str, position: int) -> list[int]:
    out = tok.encode(text)
    ids = getattr(out, "ids", out)  # tokenizers.Encoding carries its ids as .ids
    if isinstance(ids, torch.Tensor):
        ids = ids.tolist()
    ids = list(ids)
    if not ids:
        # A text of no tokens has no mean: refused rather than embedded as NaN.
        raise ValueError(f"{who}: text {position} ({text!r}) encodes to no tokens")
    return ids


def check_encodable(tok: Any, texts: Sequence[str], who: str) -> None:
    """Every text encodes to at least one token (the refusal a run would otherwise meet
    at its first batch holding the text, after its directory exists)."""
    for i, text in enumerate(texts):
        _ids(tok, text, who, i)


def encode_texts(tok: Any, texts: Sequence[str], max_length: int | None,
                 who: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``(ids (B, L) int64, lengths (B,) int64)`` of ``texts``, each cut to
    ``max_length`` tokens (None: kept whole), right-padded with the pad id."""
    limit = check_optional_count(f"{who} max_length", max_length)
    rows = [_ids(tok, text, who, i) for i, text in enumerate(texts)]
    if limit is not None:
        rows = [row[:limit] for row in rows]
    pad = getattr(tok, "pad_id", None)
    pad = 0 if pad is None else int(pad)
    width = max(len(row) for row in rows)
    ids = torch.full((len(rows), width), pad, dtype=torch.long)
    for i, row in enumerate(rows):
        ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
    return ids, torch.tensor([len(row) for row in rows], dtype=torch.long)
