"""NNTransformerParams and its builder (spec §2.3, §2.4, §15)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from nnx.lm.params import NNTransformerParams, NNTransformerParamsBuilder

COUNTS = ("vocab_size", "n_layers", "d_model", "max_seq_len", "ffn_mult")
BAD_COUNTS = [math.nan, math.inf, True, "8", 8.0, 0, -2]


@pytest.mark.parametrize("field", COUNTS)
@pytest.mark.parametrize("bad", BAD_COUNTS)
def test_counts_are_refused_naming_the_field(field: str, bad: object) -> None:
    kwargs = {"vocab_size": 16, field: bad}
    with pytest.raises(ValueError, match=rf"NNTransformerParams\.{field} must be an integer"):
        NNTransformerParams(**kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf, 0, -1.0, True, "1e4"])
def test_rope_base_must_be_finite_and_positive(bad: object) -> None:
    with pytest.raises(ValueError, match=r"NNTransformerParams\.rope_base"):
        NNTransformerParams(vocab_size=16, rope_base=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("field", ["attn_dropout", "resid_dropout"])
@pytest.mark.parametrize("bad", [math.nan, 1.5, -0.1, True, "0.1"])
def test_dropout_rates_are_probabilities(field: str, bad: object) -> None:
    with pytest.raises(ValueError, match=rf"NNTransformerParams\.{field}"):
        NNTransformerParams(vocab_size=16, **{field: bad})  # type: ignore[arg-type]


def test_numpy_counts_normalize_to_plain_ints() -> None:
    params = NNTransformerParams(vocab_size=np.int64(16), n_layers=np.int32(3))
    assert type(params.vocab_size) is int and type(params.n_layers) is int
    assert params.state() == NNTransformerParams(vocab_size=16, n_layers=3).state()


@pytest.mark.parametrize(("d_model", "heads", "message"), [
    (30, 4, r"n_heads must divide d_model \(30\); got 4"),
    (36, 4, r"even head width"),
    (32, 0, r"n_heads must be an integer"),
    (32.0, 4, r"d_model must be an integer"),
])
def test_builder_layers_refuses_exactly_as_the_constructor(
        d_model: object, heads: object, message: str) -> None:
    with pytest.raises(ValueError, match=message) as direct:
        NNTransformerParams(vocab_size=16, d_model=d_model, n_heads=heads)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=message) as built:
        NNTransformerParams.builder().layers(n=2, heads=heads, d_model=d_model)  # type: ignore[arg-type]
    assert type(direct.value) is type(built.value)
    assert str(direct.value) == str(built.value)


def test_builder_layers_refuses_a_bad_depth_like_the_constructor() -> None:
    with pytest.raises(ValueError) as direct:
        NNTransformerParams(vocab_size=16, n_layers=True)
    with pytest.raises(ValueError) as built:
        NNTransformerParams.builder().layers(n=True, heads=4, d_model=32)
    assert str(direct.value) == str(built.value)


def test_every_default_stays_out_of_state() -> None:
    assert NNTransformerParams(vocab_size=16).state() == {"vocab_size": 16}
    explicit = NNTransformerParams(
        vocab_size=16, n_layers=2, d_model=128, n_heads=4, max_seq_len=256, ffn_mult=4,
        rope_base=10000.0, tie_embeddings=True, attn_dropout=0.0, resid_dropout=0.0,
        input_dim=16, output_dim=16, hidden_dims=(), dropout_prob=0.0)
    assert explicit.state() == {"vocab_size": 16}


def test_each_non_default_field_enters_state_and_round_trips() -> None:
    changes = {"n_layers": 3, "d_model": 64, "n_heads": 2, "max_seq_len": 32, "ffn_mult": 2,
               "ffn_dim": 100, "rope_base": 500.0, "norm_eps": 1e-6, "tie_embeddings": False,
               "attn_dropout": 0.1, "resid_dropout": 0.2}
    for field, value in changes.items():
        params = NNTransformerParams(vocab_size=16, **{field: value})
        assert params.state() == {"vocab_size": 16, field: value}, field
        back = NNTransformerParams.from_state(params.state())
        assert back == params and back.state() == params.state()


def test_params_are_frozen_slotted_and_keyword_only() -> None:
    params = NNTransformerParams(vocab_size=16)
    assert not hasattr(params, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        params.d_model = 8  # type: ignore[misc]
    with pytest.raises(TypeError):
        NNTransformerParams(16)  # type: ignore[misc]


def test_vocab_derives_input_and_output_dims() -> None:
    params = NNTransformerParams(vocab_size=16)
    assert params.input_dim == params.output_dim == 16
    with pytest.raises(ValueError, match=r"NNTransformerParams\.output_dim must equal"):
        NNTransformerParams(vocab_size=16, output_dim=8)


def test_builder_six_methods_build_the_same_params() -> None:
    built = (NNTransformerParams.builder().vocab(32).layers(n=3, heads=2, d_model=16)
             .ffn(2).context(max_seq_len=64, rope_base=500.0).dropout(attn=0.1, resid=0.2)
             .tied_embeddings(False).build())
    assert built == NNTransformerParams(
        vocab_size=32, n_layers=3, n_heads=2, d_model=16, ffn_mult=2, max_seq_len=64,
        rope_base=500.0, attn_dropout=0.1, resid_dropout=0.2, tie_embeddings=False)


def test_builder_needs_a_vocabulary() -> None:
    with pytest.raises(ValueError, match=r"\.vocab\(size\)"):
        NNTransformerParams.builder().layers(n=1, heads=2, d_model=8).build()


def test_context_and_dropout_reset_omitted_values() -> None:
    base = NNTransformerParams.builder().vocab(8).context(max_seq_len=32, rope_base=50.0)
    assert base.copy().context(max_seq_len=64).build().rope_base == 10000.0
    drop = NNTransformerParams.builder().vocab(8).dropout(attn=0.1, resid=0.1)
    assert drop.copy().dropout(attn=0.2).build().resid_dropout == 0.0


def test_copy_branches_independently() -> None:
    base = NNTransformerParams.builder().vocab(32).layers(n=2, heads=2, d_model=16)
    wide = base.copy().ffn(8).build()
    deep = base.copy().layers(n=4, heads=2, d_model=16).build()
    assert base.build() == NNTransformerParams(vocab_size=32, n_layers=2, n_heads=2, d_model=16)
    assert (wide.ffn_mult, wide.n_layers) == (8, 2)
    assert (deep.ffn_mult, deep.n_layers) == (4, 4)


def test_from_params_round_trips_every_field() -> None:
    params = NNTransformerParams(vocab_size=32, d_model=16, n_heads=2, rope_base=50.0,
                                 hidden_dims=(3,), dropout_prob=0.5, ffn_dim=40)
    rebuilt = NNTransformerParamsBuilder.from_params(params).build()
    assert rebuilt == params
    assert list(rebuilt.state().items()) == list(params.state().items())
    longer = (NNTransformerParamsBuilder.from_params(params)
              .context(max_seq_len=2048, rope_base=params.rope_base).build())
    assert (longer.max_seq_len, longer.rope_base, longer.hidden_dims) == (2048, 50.0, (3,))


def test_from_params_takes_exactly_its_own_class() -> None:
    @dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
    class Sub(NNTransformerParams):
        pass

    with pytest.raises(TypeError, match="Sub"):
        NNTransformerParamsBuilder.from_params(Sub(vocab_size=8))
