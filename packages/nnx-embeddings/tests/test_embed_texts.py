"""embed_texts (spec §13.2, §16): batched, no autograd, L2-normalised, modes restored."""

from __future__ import annotations

import pytest
import torch
from _emb_tiny import Counting, WordTokenizer, embedder

from nnx.embeddings import embed_texts

TOK = WordTokenizer(["red", "green", "blue", "cat", "dog"])
TEXTS = ["red cat", "green dog dog", "blue", "cat dog red green", "dog"]


def modes(net: torch.nn.Module) -> dict[str, bool]:
    return {name: sub.training for name, sub in net.named_modules()}


def test_rows_are_unit_norm_cpu_float32_and_independent_of_the_batch():
    model = embedder(len(TOK.vocab) + 2)
    z = embed_texts(model, TEXTS, tokenizer=TOK, batch_size=2)
    assert z.shape == (5, 16) and z.dtype == torch.float32 and z.device.type == "cpu"
    assert not z.requires_grad
    torch.testing.assert_close(z.norm(dim=1), torch.ones(5))
    # Padding never reaches the mean: a text embeds the same alone as in any batch.
    alone = torch.cat([embed_texts(model, [t], tokenizer=TOK) for t in TEXTS])
    torch.testing.assert_close(z, alone, atol=1e-6, rtol=1e-5)
    raw = embed_texts(model, TEXTS, tokenizer=TOK, normalize=False)
    torch.testing.assert_close(torch.nn.functional.normalize(raw, dim=1), z)


def test_the_mean_over_real_tokens_by_hand():
    model = embedder(len(TOK.vocab) + 2)
    net = model.net
    got = embed_texts(model.net, ["red cat", "dog"], tokenizer=TOK, normalize=False)
    with torch.no_grad():
        net.eval()
        want = torch.stack([net(torch.tensor([TOK.encode(t)]))[0].mean(dim=0)
                            for t in ("red cat", "dog")])
    torch.testing.assert_close(got, want)


def test_a_mixed_train_eval_tree_is_restored_and_the_body_runs_in_eval():
    model = embedder(len(TOK.vocab) + 2)
    model.net.train()
    model.net.drop.eval()  # mixed: the root trains, its dropout evaluates
    before = modes(model.net)
    seen = []
    model.net.proj.register_forward_hook(lambda m, i, o: seen.append(modes(model.net)))
    embed_texts(model, TEXTS, tokenizer=TOK, batch_size=2)
    assert modes(model.net) == before
    assert seen and all(not any(m.values()) for m in seen)


def test_modes_are_restored_when_the_body_raises():
    model = embedder(len(TOK.vocab) + 2)
    model.net.train()
    model.net.proj.eval()
    before = modes(model.net)
    calls = []

    def fail_second(module, inputs, output):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom in the second batch")

    model.net.proj.register_forward_hook(fail_second)
    with pytest.raises(RuntimeError, match="boom"):
        embed_texts(model, TEXTS, tokenizer=TOK, batch_size=2)
    assert len(calls) == 2 and modes(model.net) == before


@pytest.mark.parametrize("texts, kwargs, error, match", [
    ("red cat", {}, TypeError, "sequence of strings"),
    ([], {}, ValueError, "texts is empty"),
    (["red", 3], {}, TypeError, r"texts\[1\] is int"),
    (["red", ""], {}, ValueError, "text 1 .* encodes to no tokens"),
    (["red"], {"batch_size": 0}, ValueError, "batch_size"),
    (["red"], {"max_length": 0}, ValueError, "max_length"),
    (["red"], {"normalize": 1}, TypeError, "normalize must be a bool"),
    (["red"], {"tokenizer": None}, TypeError, "needs tokenizer="),
    (["red"], {"tokenizer": object()}, TypeError, "must have encode"),
])
def test_refusals_come_before_any_forward(texts, kwargs, error, match):
    net = Counting(len(TOK.vocab) + 2)
    Counting.calls = 0
    kwargs = {"tokenizer": TOK, **kwargs}
    with pytest.raises(error, match=match):
        embed_texts(net, texts, **kwargs)
    assert Counting.calls == 0


def test_the_model_tokenizer_and_max_length():
    model = embedder(len(TOK.vocab) + 2)
    model.tokenizer = TOK  # a GenerativeNNModel carries its own
    cut = embed_texts(model, ["red cat dog"], max_length=2)
    torch.testing.assert_close(cut, embed_texts(model, ["red cat"]))


class EncodingTokenizer:
    """Returns an object with ``.ids``, as ``tokenizers.Tokenizer.encode`` does."""

    pad_id = 0

    class Encoding:
        def __init__(self, ids):
            self.ids = ids

    def encode(self, text):
        return self.Encoding(TOK.encode(text))


def test_a_tokenizer_returning_encodings_embeds_the_same():
    model = embedder(len(TOK.vocab) + 2)
    torch.testing.assert_close(embed_texts(model, TEXTS, tokenizer=EncodingTokenizer()),
                               embed_texts(model, TEXTS, tokenizer=TOK))
