"""NNTokenizerParams over tokenizers it did not train (issue 26 item 1, spec §15).

The special tokens are read from the tokenizer when it has them and are None when
it has not; explicit spellings still override. Every tokenizer here is trained
locally with the ``tokenizers`` library (nothing is downloaded).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from nnx import GenerativeNNModel, Nets, NNModelParams, NNOptimParams, NNTrainParams
from nnx.lm import NNTokenizerParams, NNTransformerParams
from nnx.lm_tasks import CausalLMTask

CORPUS = (Path(__file__).parent / "data" / "tiny_corpus.txt").read_text(encoding="utf-8")


def byte_bpe(specials: list[str]) -> Tokenizer:
    """A byte-level BPE trained the plain ``tokenizers`` way, with ``specials`` only."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS.splitlines(), trainer=trainer)
    return tok


def test_a_plain_bpe_without_special_tokens_wraps(tmp_path: Path) -> None:
    tok = byte_bpe([])
    path = tmp_path / "plain.json"
    tok.save(str(path))
    params = NNTokenizerParams(path=str(path), tokenizer=tok)
    assert (params.pad_token, params.bos_token, params.eos_token) == (None, None, None)
    assert (params.pad_id, params.bos_id, params.eos_id) == (None, None, None)
    assert params.state() == {"path": str(path)}
    assert NNTokenizerParams.from_state(params.state()) == params
    text = "The keeper wrote in the notebook."
    assert params.decode(params.encode(text)) == text
    # A special id is needed only where it is asked for, and the refusal says so.
    with pytest.raises(ValueError, match=r"NNTokenizerParams\.eos_token is None: this "
                                         r"tokenizer has no such token \(name one"):
        params.encode(text, eos=True)


@pytest.mark.parametrize(("specials", "expected"), [
    (["<|endoftext|>"], (None, "<|endoftext|>", "<|endoftext|>")),  # GPT-2
    (["<unk>", "<s>", "</s>"], (None, "<s>", "</s>")),               # Llama 2 / Mistral
    (["[PAD]", "<s>", "</s>"], ("[PAD]", "<s>", "</s>")),
    (["<pad>", "<bos>", "<eos>"], ("<pad>", "<bos>", "<eos>")),     # NNx's own
])
def test_special_tokens_are_read_from_the_tokenizer(specials: list[str],
                                                    expected: tuple[str | None, ...]) -> None:
    tok = byte_bpe(specials)
    params = NNTokenizerParams(tokenizer=tok)
    assert (params.pad_token, params.bos_token, params.eos_token) == expected
    ids = [None if t is None else tok.token_to_id(t) for t in expected]
    assert [params.pad_id, params.bos_id, params.eos_id] == ids
    assert params.state() == {}  # everything derives from the tokenizer


def test_a_padding_configuration_names_the_pad_token() -> None:
    tok = byte_bpe(["<|endoftext|>"])
    tok.enable_padding(pad_id=tok.token_to_id("<|endoftext|>"), pad_token="<|endoftext|>")
    assert NNTokenizerParams(tokenizer=tok).pad_token == "<|endoftext|>"


def test_an_ordinary_vocabulary_entry_is_never_taken_for_a_special_token() -> None:
    # "<s>" as a plain word of the vocabulary is text, not a begin-of-sequence token.
    vocab = {"<s>": 0, "</s>": 1, "<pad>": 2, "a": 3, "[UNK]": 4}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    assert tok.token_to_id("<s>") == 0
    params = NNTokenizerParams(tokenizer=tok)
    assert (params.pad_token, params.bos_token, params.eos_token) == (None, None, None)
    named = NNTokenizerParams(tokenizer=tok, bos_token="<s>")  # an explicit spelling may
    assert named.bos_id == 0                                   # name any vocabulary entry


def test_explicit_spellings_override_and_are_stored(tmp_path: Path) -> None:
    tok = byte_bpe(["<|endoftext|>"])
    path = tmp_path / "gpt2ish.json"
    tok.save(str(path))
    eot = tok.token_to_id("<|endoftext|>")
    padded = NNTokenizerParams(path=str(path), pad_token="<|endoftext|>", bos_token=None)
    assert (padded.pad_id, padded.bos_id, padded.eos_id) == (eot, None, eot)
    assert padded.state() == {"path": str(path), "pad_token": "<|endoftext|>",
                              "bos_token": None}
    again = NNTokenizerParams.from_state(padded.state())
    assert (again.pad_id, again.bos_id, again.eos_id) == (eot, None, eot)
    with pytest.raises(ValueError, match=r"NNTokenizerParams\.pad_token '<pad>' is not in"):
        NNTokenizerParams(tokenizer=tok, pad_token="<pad>")


def test_a_plain_bpe_trains_a_language_model_and_generates(tmp_path: Path) -> None:
    """The issue's flow: wrap a plain BPE, train a tiny TransformerNN a few steps, generate."""
    tok = byte_bpe([])
    tok.save(str(tmp_path / "tok.json"))
    params = NNTokenizerParams(path=str(tmp_path / "tok.json"), tokenizer=tok)
    vocab = params.vocab_size
    stream = torch.tensor([i for line in CORPUS.splitlines() for i in params.encode(line)])
    rows = stream[: len(stream) // 17 * 17].view(-1, 17)[:16]
    torch.manual_seed(0)
    model = GenerativeNNModel(
        NNTransformerParams(vocab_size=vocab, d_model=16, n_heads=2, n_layers=1,
                            max_seq_len=64),
        NNModelParams(net=Nets.TRANSFORMER), tokenizer=params,
        task=CausalLMTask(vocab_size=vocab, pad_id=params.pad_id))  # pad_id None: no padding
    before = model.net.embed.weight.detach().clone()
    model.train(NNTrainParams(n_epochs=1, train_loader=[rows[:8], rows[8:]], scheduler=None,
                              optim=NNOptimParams.builder().adamw(max_lr=1e-2).build()),
                root=tmp_path / "runs", verbose=False)
    assert not torch.equal(before, model.net.embed.weight)
    out = model.generate("The keeper", max_new_tokens=12, temperature=0)
    assert isinstance(out, str)
    assert out == model.generate("The keeper", max_new_tokens=12, temperature=0,
                                 use_cache=False)
    sampled = model.generate("The keeper", max_new_tokens=12, top_p=0.9,
                             repetition_penalty=1.3, seed=0)
    assert isinstance(sampled, str)
