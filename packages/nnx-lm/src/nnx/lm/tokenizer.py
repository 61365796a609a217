"""NNTokenizerParams (spec §15): a tokenizer and the path of its saved JSON.

It wraps a ``tokenizers.Tokenizer``. The special tokens (padding, begin- and
end-of-sequence) are read from the tokenizer unless given: any tokenizer wraps,
also one with none of them (a GPT-2-style or trained-from-scratch BPE).
``state()`` holds only the path and the special-token spellings that the
tokenizer would not give by itself; the tokenizer object is runtime state,
rebuilt from the path by ``from_state``. A configuration that uses no tokenizer
never holds one of these, so its run id is untouched.

``tokenizers`` is imported only here, and only when a tokenizer is built,
loaded or trained: ``TransformerNN`` alone never imports it.

:meth:`NNTokenizerParams.train` builds a byte-level BPE: every byte is in the
base alphabet, so ``decode(encode(text)) == text`` for any Unicode text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import torch

from nnx.extend import (
    Params,
    atomic_write_text,
    check_count,
    check_optional_str,
    runtime,
    set_field,
)

if TYPE_CHECKING:
    from tokenizers import Tokenizer

__all__ = ["BYTE_ALPHABET_SIZE", "DETECT", "NNTokenizerParams"]

#: A byte-level BPE starts from all 256 bytes; the vocabulary must hold them.
BYTE_ALPHABET_SIZE = 256

_SPECIALS = ("pad_token", "bos_token", "eos_token")

#: The spellings each role goes by (NNx's own first, then the Hugging Face conventions:
#: T5 / Llama 2 / Mistral, BERT, Llama 3, GPT-2, whose "<|endoftext|>" is both bos and
#: eos). Only a tokenizer's *special* added tokens are read, never an ordinary
#: vocabulary entry: a byte-level BPE may learn "<s>" as a merge of plain text.
_CONVENTIONS: Final = {
    "pad_token": ("<pad>", "[PAD]", "<|pad|>", "<|padding|>"),
    "bos_token": ("<bos>", "<s>", "<|begin_of_text|>", "<|startoftext|>", "<|endoftext|>"),
    "eos_token": ("<eos>", "</s>", "<|end_of_text|>", "<|endoftext|>"),
}


class _Detect:
    """The special-token default: read the token from the tokenizer."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "DETECT"


#: The default of ``pad_token`` / ``bos_token`` / ``eos_token``: the tokenizer's own.
DETECT: Final = _Detect()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class NNTokenizerParams(Params):
    """A tokenizer (``tokenizer=``) and/or the JSON file it is saved in (``path=``).

    Given only ``path``, the file is loaded. The special tokens name the
    padding, begin- and end-of-sequence tokens. Left at :data:`DETECT` (the
    default), each is read from the tokenizer: its padding configuration for the
    pad token, else the first of the role's conventional spellings
    (``_CONVENTIONS``) among its special tokens, else None (the tokenizer has
    none; the matching ``*_id`` is None). A spelling given explicitly must be in
    the vocabulary; ``None`` says there is none. The tokenizer's
    ``encode_special_tokens`` is switched on, so a special token's spelling
    inside text encodes as ordinary text.
    """

    path: str | None = None
    pad_token: str | _Detect | None = DETECT
    bos_token: str | _Detect | None = DETECT
    eos_token: str | _Detect | None = DETECT
    tokenizer: Tokenizer | None = runtime(None)

    def __post_init__(self) -> None:
        name = type(self).__name__
        for field in _SPECIALS:
            if getattr(self, field) is not DETECT:
                check_optional_str(f"{name}.{field}", getattr(self, field))
        if self.path is not None:
            if not isinstance(self.path, (str, os.PathLike)) or not os.fspath(self.path):
                raise ValueError(f"{name}.path must be a non-empty path; got {self.path!r}")
            set_field(self, "path", os.fspath(self.path))
        if self.tokenizer is None:
            if self.path is None:
                raise ValueError(f"{name} needs path= (a saved tokenizer JSON) or tokenizer=")
            set_field(self, "tokenizer", _load(f"{name}.path", Path(self.path)))
        elif not isinstance(self.tokenizer, _tokenizers().Tokenizer):
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
            if token is DETECT:
                set_field(self, field, _detect(self._tok, field))
            elif token is not None and self._tok.token_to_id(token) is None:
                raise ValueError(
                    f"{name}.{field} {token!r} is not in the tokenizer's vocabulary "
                    f"(pass {field}=None if it has none, or leave it out to read it "
                    f"from the tokenizer)"
                )

    def omit_from_state(self, name: str, value: Any) -> bool:
        # A special token the tokenizer gives by itself derives from the file: from_state
        # reads it again, so only a spelling that overrides the tokenizer is stored.
        return name in _SPECIALS and value == _detect(self._tok, name)

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
        tk = _tokenizers()
        models, pre_tokenizers, decoders = tk.models, tk.pre_tokenizers, tk.decoders
        tok = tk.Tokenizer(models.BPE())
        # No prefix space: a prefix would be decoded back and break the round trip.
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = tk.trainers.BpeTrainer(
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

    def _id(self, token: str | _Detect | None) -> int | None:
        # After __post_init__ every special is a spelling or None, never DETECT.
        return self._tok.token_to_id(token) if isinstance(token, str) else None

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
            raise ValueError(f"NNTokenizerParams.{field} is None: this tokenizer has no such "
                             f"token (name one of its tokens with {field}=...)")
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


def _tokenizers() -> Any:
    """The ``tokenizers`` package, imported on first use (a net alone never needs it)."""
    import tokenizers

    return tokenizers


def _detect(tok: Tokenizer, field: str) -> str | None:
    """The tokenizer's own spelling for the ``field`` role, or None when it has none."""
    if field == "pad_token":
        padding = tok.padding  # a tokenizer saved with padding on names its pad token
        if padding and tok.token_to_id(padding.get("pad_token") or "") is not None:
            return str(padding["pad_token"])
    special = {t.content for t in tok.get_added_tokens_decoder().values() if t.special}
    return next((s for s in _CONVENTIONS[field] if s in special), None)


def _load(field: str, path: Path) -> Tokenizer:
    if not path.is_file():
        raise FileNotFoundError(f"{field}: no tokenizer file at {str(path)!r}")
    try:
        tok: Tokenizer = _tokenizers().Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises a bare Exception on bad JSON
        raise ValueError(f"{field}: {str(path)!r} is not a tokenizers JSON file: {exc}") from None
    return tok
