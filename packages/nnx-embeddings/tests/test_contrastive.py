"""train_contrastive and text_contrastive_train_step_factory (spec §10.2, §16)."""

from __future__ import annotations

import copy
import sys

import pytest
import torch
from _emb_tiny import WordTokenizer, embedder, recall_at_1, synonym_task

from nnx import MissingDistributionError, NNOptimParams, NNTrainParams
from nnx.embeddings import embed_texts, text_contrastive_train_step_factory, train_contrastive
from nnx.paradigms import nt_xent_loss

TOK = WordTokenizer(["a", "b", "c", "d", "e", "f"])


def sgd(lr: float = 0.1) -> NNOptimParams:
    return NNOptimParams.builder().sgd(max_lr=lr).build()


def mean_states(net, texts):
    return torch.stack([net(torch.tensor([TOK.encode(t)]))[0].mean(dim=0) for t in texts])


def test_the_step_is_nt_xent_of_the_pooled_views(tmp_path):
    batches = [(["a b", "c", "d e f"], ["b a", "c c", "f"]),
               (["e", "a c"], ["e f", "c a b"])]
    model = embedder(len(TOK.vocab) + 2)
    model.net.drop.p = 0.0  # the reference below draws no dropout mask
    ref = copy.deepcopy(model.net)
    step = text_contrastive_train_step_factory(tokenizer=TOK, temperature=0.3)
    run = model.train(NNTrainParams(n_epochs=1, train_loader=batches, optim=sgd(), seed=0,
                                    scheduler=None),
                      train_step_fn=step, root=tmp_path, verbose=False)
    opt = torch.optim.SGD(ref.parameters(), lr=0.1)
    losses = []
    for a, b in batches:
        loss = nt_xent_loss(mean_states(ref, a), mean_states(ref, b), temperature=0.3)
        losses.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert [idp.train_edp.loss for idp in run.idps] == pytest.approx(losses, abs=1e-6)
    for name, p in ref.state_dict().items():
        torch.testing.assert_close(model.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)


def test_the_trained_embedder_beats_the_untrained_one_on_held_out_retrieval(tmp_path):
    tok, pairs, docs, queries = synonym_task(n_train=256, seed=0)
    vocab = len(tok.vocab) + 2
    untrained, model = embedder(vocab, seed=1), embedder(vocab, seed=1)
    before = recall_at_1(embed_texts(untrained, queries, tokenizer=tok),
                         embed_texts(untrained, docs, tokenizer=tok))
    train_contrastive(model, pairs, n_epochs=4, batch_size=32, tokenizer=tok,
                      temperature=0.2, optim=NNOptimParams.builder().adam(max_lr=0.02).build(),
                      seed=0, root=tmp_path, verbose=False)
    after = recall_at_1(embed_texts(model, queries, tokenizer=tok),
                        embed_texts(model, docs, tokenizer=tok))
    assert before < 0.2 and after >= 0.6 and after > before


def test_train_contrastive_is_seeded(tmp_path):
    tok, pairs, _, _ = synonym_task(n_concepts=10, n_train=40, n_held_out=1)
    nets = []
    for root in ("one", "two"):
        model = embedder(len(tok.vocab) + 2, seed=2)
        train_contrastive(model, pairs, n_epochs=2, batch_size=8, tokenizer=tok, seed=5,
                          optim=sgd(), root=tmp_path / root, verbose=False)
        nets.append(model.net.state_dict())
    for name, p in nets[0].items():
        assert torch.equal(p, nets[1][name]), name


@pytest.mark.parametrize("pairs, kwargs, error, match", [
    ([("a", "b")], {}, ValueError, "at least 2 pairs"),
    ("ab", {}, TypeError, "sequence of"),
    ([("a", "b"), ("c",)], {}, ValueError, r"pairs\[1\] is not"),
    ([("a", "b"), ("c", 4)], {}, TypeError, r"texts_b\[1\] is int"),
    ([("a", "b"), ("c", "d")], {"batch_size": 0}, ValueError, "batch_size"),
    ([("a", "b"), ("c", "d")], {"temperature": 0}, ValueError, "temperature"),
    ([("a", "b"), ("c", "d")], {"tokenizer": 3}, TypeError, "must have encode"),
    ([("a", "b"), ("c", "d")], {"tokenizer": None}, TypeError, "needs tokenizer="),
    ([("a", "b"), ("c", "")], {}, ValueError, r"text 3 \(''\) encodes to no tokens"),
    ([("a", "b"), ("c", "d")], {"train_step_fn": print}, TypeError, "owns the update"),
])
def test_refusals_come_before_the_run_directory(tmp_path, pairs, kwargs, error, match):
    model = embedder(len(TOK.vocab) + 2)
    kwargs = {"tokenizer": TOK, **kwargs}
    with pytest.raises(error, match=match):
        train_contrastive(model, pairs, root=tmp_path, verbose=False, **kwargs)
    assert list(tmp_path.iterdir()) == []


def test_without_nnx_paradigms_the_factory_names_its_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "nnx.paradigms", None)  # as if not installed
    with pytest.raises(MissingDistributionError, match=r"pip install nnx-paradigms") as err:
        text_contrastive_train_step_factory(tokenizer=TOK)
    assert "needed by text_contrastive_train_step_factory" in str(err.value)


@pytest.mark.parametrize("batch, match", [
    (["a", "b", "c"], r"\(texts_a, texts_b\) batches; got list of length 3"),
    ((["a", "b"], ["c"]), "texts_a has 2 texts and texts_b 1"),
])
def test_the_step_refuses_a_batch_that_is_not_paired_texts(tmp_path, batch, match):
    model = embedder(len(TOK.vocab) + 2)
    with pytest.raises(ValueError, match=match):
        model.train(NNTrainParams(n_epochs=1, train_loader=[batch], optim=sgd(), seed=0),
                    train_step_fn=text_contrastive_train_step_factory(tokenizer=TOK),
                    root=tmp_path, verbose=False)
