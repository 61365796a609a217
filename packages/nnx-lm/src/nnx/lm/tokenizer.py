"""NNTokenizerParams (spec §15): a tokenizer and the path of its saved JSON.

It wraps a ``tokenizers.Tokenizer``. ``state()`` holds only the path and the
special-token spellings that differ from their defaults; the tokenizer object
is runtime state, rebuilt from the path by ``from_state``. A configuration
that uses no tokenizer never holds one of these, so its run id is untouched.

:meth:`NNTokenizerParams.train` builds a byte-level BPE: every byte is in the
base alphabet, so ``decode(encode(text)) == text`` for any Unicode text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from nnx.extend import (
    Params,
    atomic_write_text,
    check_count,
    check_optional_str,
    runtime,
    set_field,
)

__all__ = ["BYTE_ALPHABET_SIZE", "NNTokenizerParams"]

#: A byte-level BPE starts from all 256 bytes; the vocabulary must hold them.
BYTE_ALPHABET_SIZE = 256

_SPECIALS = ("pad_token", "bos_token", "eos_token")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class NNTokenizerParams(Params):
    """A tokenizer (``tokenizer=``) and/or the JSON file it is saved in (``path=``).

    Given only ``path``, the file is loaded. The special tokens name the
    padding, begin- and end-of-sequence tokens; ``None`` means the tokenizer
    has none. A named special token must be in the tokenizer's vocabulary.
    The tokenizer's ``encode_special_tokens`` is switched on, so a special
    token's spelling inside text encodes as ordinary text.
    """

    path: str | None = None
    pad_token: str | None = "<pad>"
    bos_token: str | None = "<bos>"
    eos_token: str | None = "<eos>"
    tokenizer: Tokenizer | None = runtime(None)

    def __post_init__(self) -> None:
        name = type(self).__name__
        for field in _SPECIALS:
            check_optional_str(f"{name}.{field}", getattr(self, field))
        if self.path is not None:
            if not isinstance(self.path, (str, os.PathLike)) or not os.fspath(self.path):
                raise ValueError(f"{name}.path must be a non-empty path; got {self.path!r}")
            set_field(self, "path", os.fspath(self.path))
        if self.tokenizer is None:
            if self.path is None:
                raise ValueError(f"{name} needs path= (a saved tokenizer JSON) or tokenizer=")
            set_field(self, "tokenizer", _load(f"{name}.path", Path(self.path)))
        elif not isinstance(self.tokenizer, Tokenizer):
            raise TypeError(
                f"{name}.tokenizer must be a tokenizers.Tokenizer; "
                f"got {type(self.tokenizer).__name__}"
            )
        # Text is always ordinary text: "<eos>" typed by a user must not become the
        # eos id (that would end generation early and break the round trip); the
        # special ids enter only through encode(bos=, eos=). Not saved in the JSON.
        self._tok.encode_special_tokens = True
        for field in _SPECIALS:
            token = getattr(self, field)
            if token is not None and self._tok.token_to_id(token) is None:
                raise ValueError(
                    f"{name}.{field} {token!r} is not in the tokenizer's vocabulary "
                    f"(pass {field}=None if it has none)"
                )

    @classmethod
    def train(
        cls,
        texts: str | Iterable[str],
        *,
        vocab_size: int,
        min_frequency: int = 2,
        path: str | os.PathLike[str] | None = None,
        pad_token: str | None = "<pad>",
        bos_token: str | None = "<bos>",
        eos_token: str | None = "<eos>",
    ) -> NNTokenizerParams:
        """Train a byte-level BPE on ``texts`` (one string or many); save it to ``path`` if given.

        ``vocab_size`` counts the 256 bytes and the special tokens too.
        """
        specials = [t for t in (pad_token, bos_token, eos_token) if t is not None]
        for i, t in enumerate(specials):
            check_optional_str(f"NNTokenizerParams.train special token [{i}]", t)
        size = check_count("NNTokenizerParams.train vocab_size", vocab_size,
                           minimum=BYTE_ALPHABET_SIZE + len(specials))
        freq = check_count("NNTokenizerParams.train min_frequency", min_frequency)
        corpus = [texts] if isinstance(texts, str) else list(texts)
        for i, text in enumerate(corpus):
            if not isinstance(text, str):
                raise TypeError(
                    f"NNTokenizerParams.train texts[{i}] must be a str; got {type(text).__name__}"
                )
        tok = Tokenizer(models.BPE())
        # No prefix space: a prefix would be decoded back and break the round trip.
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=size,
            min_frequency=freq,
            special_tokens=specials,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(corpus, trainer=trainer)
        params = cls(tokenizer=tok, pad_token=pad_token, bos_token=bos_token,
                     eos_token=eos_token)
        return params if path is None else params.save(path)

    @classmethod
    def load(cls, path: str | os.PathLike[str], **special_tokens: Any) -> NNTokenizerParams:
        """The tokenizer saved at ``path`` (special-token spellings as keywords)."""
        return cls(path=os.fspath(path), **special_tokens)

    def save(self, path: str | os.PathLike[str]) -> NNTokenizerParams:
        """Write the tokenizer JSON to ``path`` atomically; the params that point at it."""
        dest = Path(os.fspath(path))
        dest.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(dest, self._tok.to_str())
        return replace(self, path=os.fspath(dest), tokenizer=self._tok)

    @property
    def _tok(self) -> Tokenizer:
        tok = self.tokenizer
        assert tok is not None  # __post_init__ loads it or refuses
        return tok

    @property
    def vocab_size(self) -> int:
        return int(self._tok.get_vocab_size())

    def _id(self, token: str | None) -> int | None:
        return None if token is None else self._tok.token_to_id(token)

    @property
    def pad_id(self) -> int | None:
        return self._id(self.pad_token)

    @property
    def bos_id(self) -> int | None:
        return self._id(self.bos_token)

    @property
    def eos_id(self) -> int | None:
        return self._id(self.eos_token)

    def encode(self, text: str, *, bos: bool = False, eos: bool = False) -> list[int]:
        """Token ids of ``text``, optionally framed by the bos / eos ids."""
        if not isinstance(text, str):
            raise TypeError(f"NNTokenizerParams.encode takes a str; got {type(text).__name__}")
        ids: list[int] = list(self._tok.encode(text, add_special_tokens=False).ids)
        head = [self._need("bos_token")] if bos else []
        tail = [self._need("eos_token")] if eos else []
        return head + ids + tail

    def decode(self, ids: Sequence[int] | torch.Tensor, *, skip_special_tokens: bool = True) -> str:
        """Text of ``ids`` (a list or a 1-D tensor); special tokens dropped by default."""
        seq = ids.tolist() if isinstance(ids, torch.Tensor) else [int(i) for i in ids]
        return str(self._tok.decode(seq, skip_special_tokens=skip_special_tokens))

    def _need(self, field: str) -> int:
        token_id = self._id(getattr(self, field))
        if token_id is None:
            raise ValueError(f"NNTokenizerParams.{field} is None: this tokenizer has no such token")
        return token_id

    def __eq__(self, other: object) -> bool:
        # Equal config and the same vocabulary and merges, not the same Python object.
        return (
            type(other) is type(self)
            and isinstance(other, NNTokenizerParams)
            and self.state() == other.state()
            and self._tok.to_str() == other._tok.to_str()
        )

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(sorted(self.state().items()))))


def _load(field: str, path: Path) -> Tokenizer:
    if not path.is_file():
        raise FileNotFoundError(f"{field}: no tokenizer file at {str(path)!r}")
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception on bad JSON
        raise ValueError(f"{field}: {str(path)!r} is not a tokenizers JSON file: {exc}") from None
