"""NNTokenizerParams: byte-level BPE training, save / load, round trips, specials, refusals."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest
import torch

from nnx.lm.tokenizer import NNTokenizerParams

CORPUS = (Path(__file__).parent / "data" / "tiny_corpus.txt").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def trained() -> NNTokenizerParams:
    return NNTokenizerParams.train(CORPUS.splitlines(), vocab_size=400)


def test_training_learns_merges_up_to_the_vocab_size(trained: NNTokenizerParams) -> None:
    assert 259 < trained.vocab_size <= 400
    text = "The keeper wrote in the notebook."
    # Merges make common words shorter than their bytes.
    assert len(trained.encode(text)) < len(text.encode("utf-8"))


@pytest.mark.parametrize(
    "text",
    [
        "The lamp turned and turned.",
        "  leading spaces, trailing tabs\t\n",
        "café naïve façade — 灯台 こんにちは Привет 🚢",
        "",
    ],
)
def test_encode_decode_round_trip(trained: NNTokenizerParams, text: str) -> None:
    assert trained.decode(trained.encode(text)) == text
    assert trained.decode(torch.tensor(trained.encode(text), dtype=torch.long)) == text


def test_special_tokens_have_their_ids(trained: NNTokenizerParams) -> None:
    assert (trained.pad_id, trained.bos_id, trained.eos_id) == (0, 1, 2)
    ids = trained.encode("hi there", bos=True, eos=True)
    assert ids[0] == 1 and ids[-1] == 2
    assert trained.decode(ids) == "hi there"
    assert trained.decode(ids, skip_special_tokens=False) == "<bos>hi there<eos>"
    # A special's spelling in ordinary text is not the special token.
    assert 1 not in trained.encode("<bos>")


def test_save_load_round_trip(trained: NNTokenizerParams, tmp_path: Path) -> None:
    saved = trained.save(tmp_path / "tok" / "tokenizer.json")
    assert saved.path == str(tmp_path / "tok" / "tokenizer.json")
    assert saved.state() == {"path": saved.path}
    assert list((tmp_path / "tok").iterdir()) == [tmp_path / "tok" / "tokenizer.json"]
    loaded = NNTokenizerParams.load(saved.path)
    assert loaded == saved
    assert loaded.tokenizer is not saved.tokenizer
    text = "Grüße from the island, 灯台!"
    assert loaded.encode(text) == trained.encode(text)
    assert NNTokenizerParams.from_state(saved.state()) == saved


def test_train_with_path_saves(tmp_path: Path) -> None:
    out = NNTokenizerParams.train(CORPUS, vocab_size=300, path=tmp_path / "t.json")
    assert Path(out.path or "").is_file()
    assert NNTokenizerParams.load(tmp_path / "t.json").vocab_size == out.vocab_size


def test_state_omits_defaults_and_round_trips(tmp_path: Path) -> None:
    custom = NNTokenizerParams.train(CORPUS, vocab_size=300, pad_token=None,
                                     bos_token="<s>", eos_token="</s>")
    # "<s>" / "</s>" are what the tokenizer gives by itself: derived, so not stored.
    assert custom.state() == {}
    assert (custom.pad_token, custom.bos_token, custom.eos_token) == (None, "<s>", "</s>")
    assert custom.pad_id is None
    assert (custom.bos_id, custom.eos_id) == (0, 1)
    saved = custom.save(tmp_path / "c.json")
    again = NNTokenizerParams.from_state(saved.state())
    assert again.state() == saved.state() == {"path": saved.path} and again == saved
    assert (again.bos_token, again.eos_token) == ("<s>", "</s>")
    # An override of what the tokenizer gives is stored, and reloads as given.
    no_eos = NNTokenizerParams(path=saved.path, eos_token=None)
    assert no_eos.state() == {"path": saved.path, "eos_token": None}
    assert NNTokenizerParams.from_state(no_eos.state()).eos_id is None
    no_bos = NNTokenizerParams(tokenizer=custom.tokenizer, pad_token=None, bos_token=None,
                               eos_token="</s>")
    with pytest.raises(ValueError, match=r"NNTokenizerParams\.bos_token is None"):
        no_bos.encode("x", bos=True)


def test_missing_file_is_refused(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    expected = f"NNTokenizerParams.path: no tokenizer file at {str(missing)!r}"
    with pytest.raises(FileNotFoundError, match=re.escape(expected)):
        NNTokenizerParams(path=str(missing))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="is not a tokenizers JSON file"):
        NNTokenizerParams.load(bad)


@pytest.mark.parametrize("value", [300.0, True, "300", math.nan, None, 100])
def test_vocab_size_must_be_an_integer_count(value: object, tmp_path: Path) -> None:
    dest = tmp_path / "never.json"
    expected = r"NNTokenizerParams\.train vocab_size must be an integer >= 259"
    with pytest.raises(ValueError, match=expected):
        NNTokenizerParams.train(CORPUS, vocab_size=value, path=dest)  # type: ignore[arg-type]
    assert not dest.exists()


def test_other_refusals(trained: NNTokenizerParams) -> None:
    with pytest.raises(ValueError, match=r"needs path= .* or tokenizer="):
        NNTokenizerParams()
    with pytest.raises(TypeError, match=r"tokenizer must be a tokenizers\.Tokenizer"):
        NNTokenizerParams(tokenizer="gpt2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"NNTokenizerParams\.eos_token '</s>' is not in"):
        NNTokenizerParams(tokenizer=trained.tokenizer, eos_token="</s>")
    with pytest.raises(ValueError, match=r"NNTokenizerParams\.train min_frequency"):
        NNTokenizerParams.train(CORPUS, vocab_size=300, min_frequency=0)
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str"):
        NNTokenizerParams.train(["a", 3], vocab_size=300)  # type: ignore[list-item]
    with pytest.raises(TypeError, match="encode takes a str"):
        trained.encode(b"bytes")  # type: ignore[arg-type]
