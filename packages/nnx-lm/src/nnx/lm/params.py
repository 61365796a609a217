"""NNTransformerParams: a decoder-only transformer's shape (spec §2.3, §15)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from nnx import Activations
from nnx.extend import (
    NON_NEGATIVE,
    POSITIVE,
    PROBABILITY,
    NNParams,
    check_count,
    check_real,
    require_exact,
    set_field,
)

__all__ = ["NNTransformerParams", "NNTransformerParamsBuilder", "check_heads"]

_COUNTS = ("vocab_size", "n_layers", "d_model", "max_seq_len", "ffn_mult")


def check_heads(owner: str, d_model: Any, n_heads: Any) -> tuple[int, int]:
    """``(d_model, n_heads)`` as plain ints if the heads split ``d_model`` into even widths.

    Shared by the constructor and ``.builder().layers(...)`` so both refuse the same
    inputs with the same message; the counts are checked before any arithmetic.
    """
    d = check_count(f"{owner}.d_model", d_model)
    h = check_count(f"{owner}.n_heads", n_heads)
    if d % h:
        raise ValueError(f"{owner}.n_heads must divide d_model ({d}); got {h}")
    if (d // h) % 2:
        # RoPE rotates channel pairs: an odd head width leaves one channel unrotated.
        raise ValueError(
            f"{owner}.n_heads must leave an even head width (d_model / n_heads) for RoPE; "
            f"d_model={d}, n_heads={h} gives {d // h}"
        )
    return d, h


@dataclass(frozen=True, slots=True, kw_only=True)
class NNTransformerParams(NNParams):
    """TransformerNN's shape.

    ``input_dim`` / ``output_dim`` are the vocabulary (derived from ``vocab_size``
    when omitted). The inherited feed-forward knobs (``hidden_dims``,
    ``activation``, ``dropout_prob``) are not read by the net; unlike in
    NNParams they are not ``always()`` fields here, so every field — those too —
    stays out of ``state()`` at its default and a field added later never moves
    a run id. ``ffn_dim`` (optional) overrides the SwiGLU width
    ``ffn_mult × d_model``, for checkpoints whose width is no multiple;
    ``norm_eps`` is the RMSNorm epsilon.
    """

    vocab_size: int
    input_dim: int | None = None
    output_dim: int = 0  # 0: derived from vocab_size
    hidden_dims: tuple[int, ...] = ()
    dropout_prob: float = 0.0
    activation: Activations = Activations.RELU
    n_heads: int | None = 4
    n_layers: int = 2
    d_model: int = 128
    max_seq_len: int = 256
    ffn_mult: int = 4
    ffn_dim: int | None = None
    rope_base: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = True
    attn_dropout: float = 0.0
    resid_dropout: float = 0.0

    def validate(self) -> None:
        n = self.field_name
        for field in _COUNTS:
            set_field(self, field, check_count(n(field), getattr(self, field)))
        if self.ffn_dim is not None:
            set_field(self, "ffn_dim", check_count(n("ffn_dim"), self.ffn_dim))
        d, h = check_heads(type(self).__name__, self.d_model, self.n_heads)
        set_field(self, "d_model", d)
        set_field(self, "n_heads", h)
        set_field(self, "rope_base", check_real(n("rope_base"), self.rope_base, POSITIVE))
        set_field(self, "norm_eps", check_real(n("norm_eps"), self.norm_eps, NON_NEGATIVE))
        for field in ("attn_dropout", "resid_dropout"):
            set_field(self, field, check_real(n(field), getattr(self, field), PROBABILITY))
        if not isinstance(self.tie_embeddings, bool):
            raise ValueError(f"{n('tie_embeddings')} must be a bool; got "
                             f"{self.tie_embeddings!r} ({type(self.tie_embeddings).__name__})")
        if self.input_dim is None:
            set_field(self, "input_dim", self.vocab_size)
        if isinstance(self.output_dim, int) and not isinstance(self.output_dim, bool) \
                and self.output_dim == 0:
            set_field(self, "output_dim", self.vocab_size)
        NNParams.validate(self)
        for field in ("input_dim", "output_dim"):
            if getattr(self, field) != self.vocab_size:
                raise ValueError(f"{n(field)} must equal vocab_size ({self.vocab_size}) or be "
                                 f"omitted; got {getattr(self, field)}")

    def omit_from_state(self, name: str, value: object) -> bool:
        if name in ("input_dim", "output_dim"):  # derived from vocab_size, never configured
            return True
        return NNParams.omit_from_state(self, name, value)

    @property
    def head_dim(self) -> int:
        """Width of one attention head (even: RoPE rotates channel pairs)."""
        assert self.n_heads is not None  # validated as a count
        return self.d_model // self.n_heads

    @property
    def ffn_width(self) -> int:
        """The SwiGLU hidden width."""
        return self.ffn_dim if self.ffn_dim is not None else self.ffn_mult * self.d_model

    @classmethod
    def builder(cls) -> NNTransformerParamsBuilder:
        """The six-method builder (spec §2.4)."""
        return NNTransformerParamsBuilder()


_OWNER = "NNTransformerParamsBuilder"


class NNTransformerParamsBuilder:
    """Fluent NNTransformerParams: ``vocab``, ``layers``, ``ffn``, ``context``, ``dropout``,
    ``tied_embeddings``, then ``build()``.

    The setters write only the LM fields, so the parent NNParams knobs the net never
    reads stay hidden. Setters mutate and return this builder; ``copy()`` branches it
    and ``from_params()`` pre-loads one (every field, inherited ones included), so
    ``from_params(p).build() == p`` with the same ``state()``. ``build()`` validates
    through the constructor.
    """

    __slots__ = ("_kwargs",)

    def __init__(self) -> None:
        self._kwargs: dict[str, Any] = {}

    def vocab(self, size: int) -> NNTransformerParamsBuilder:
        """The vocabulary; resets ``input_dim`` / ``output_dim`` to it."""
        self._kwargs["vocab_size"] = size
        self._kwargs.pop("input_dim", None)
        self._kwargs.pop("output_dim", None)
        return self

    def layers(self, *, n: int, heads: int, d_model: int) -> NNTransformerParamsBuilder:
        """Depth, heads and width; refuses what the constructor refuses, at call time."""
        n_layers = check_count("NNTransformerParams.n_layers", n)
        d, h = check_heads("NNTransformerParams", d_model, heads)
        self._kwargs.update(n_layers=n_layers, n_heads=h, d_model=d)
        return self

    def ffn(self, mult: int = 4, *, dim: int | None = None) -> NNTransformerParamsBuilder:
        """The SwiGLU width: ``mult × d_model``, or ``dim`` when given."""
        self._kwargs.update(ffn_mult=mult, ffn_dim=dim)
        return self

    def context(self, *, max_seq_len: int,
                rope_base: float = 10000.0) -> NNTransformerParamsBuilder:
        """The context length and RoPE base; an omitted ``rope_base`` resets to 10000."""
        self._kwargs.update(max_seq_len=max_seq_len, rope_base=rope_base)
        return self

    def dropout(self, *, attn: float = 0.0, resid: float = 0.0) -> NNTransformerParamsBuilder:
        """Attention and residual dropout; an omitted rate resets to 0."""
        self._kwargs.update(attn_dropout=attn, resid_dropout=resid)
        return self

    def tied_embeddings(self, tied: bool = True) -> NNTransformerParamsBuilder:
        """Share the input embedding with the output projection."""
        self._kwargs["tie_embeddings"] = tied
        return self

    def copy(self) -> NNTransformerParamsBuilder:
        """An independent branch: setters on either never affect the other."""
        other = NNTransformerParamsBuilder()
        other._kwargs = dict(self._kwargs)
        return other

    @classmethod
    def from_params(cls, params: NNTransformerParams) -> NNTransformerParamsBuilder:
        """A builder holding every field of ``params`` (exactly that class)."""
        require_exact(_OWNER, NNTransformerParams, params)
        builder = cls()
        builder._kwargs = {f.name: getattr(params, f.name) for f in dataclasses.fields(params)}
        return builder

    def build(self) -> NNTransformerParams:
        """Validate and build (the constructor's checks, per branch)."""
        if "vocab_size" not in self._kwargs:
            raise ValueError(f"{_OWNER}.build: call .vocab(size) first")
        return NNTransformerParams(**self._kwargs)
