"""expand_embedding on nnx-lm's TransformerNN (spec §16, issue 40): the token embedding
and the output head grow together, the params record the new vocabulary, and the grown
net trains and reloads as an ordinary NNx model."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _surgery_nets import same, snapshot
from torch import nn

from nnx import Devices, Nets, NNModel, NNModelParams, NNTrainParams
from nnx.surgery import SurgeryShapeError, SurgeryTargetError, expand_embedding
from nnx.testing import sgd

lm = pytest.importorskip("nnx.lm")
lm_tasks = pytest.importorskip("nnx.lm_tasks")

VOCAB, GROWN = 11, 14
IDS = torch.randint(0, VOCAB, (3, 6), generator=torch.Generator().manual_seed(4))


def shape(vocab: int = VOCAB, *, tied: bool = True, width: int = 8) -> object:
    return lm.NNTransformerParams(vocab_size=vocab, d_model=width, n_heads=2, n_layers=1,
                                  max_seq_len=12, tie_embeddings=tied)


def transformer(*, tied: bool = True, seed: int = 0, width: int = 8) -> nn.Module:
    torch.manual_seed(seed)
    net: nn.Module = lm.TransformerNN(shape(tied=tied, width=width))
    return net.eval()


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_the_embedding_and_the_head_grow_together(tied: bool) -> None:
    net = transformer(tied=tied)
    net.blocks[0].requires_grad_(False)
    before = snapshot(net)
    grown = expand_embedding(net, layer_name="embed", new_num_embeddings=GROWN)
    assert same(snapshot(net), before)  # the input is untouched
    assert type(grown) is lm.TransformerNN and grown.params == shape(GROWN, tied=tied)
    old = net.embed.weight.detach()
    assert torch.equal(grown.embed.weight[:VOCAB], old)
    assert torch.equal(grown.embed.weight[VOCAB:], old.mean(0).expand(GROWN - VOCAB, -1))
    if tied:
        assert grown.lm_head is None
    else:
        head = net.lm_head.weight.detach()
        assert grown.lm_head.weight.shape == (GROWN, 8)
        assert torch.equal(grown.lm_head.weight[:VOCAB], head)
        assert torch.equal(grown.lm_head.weight[VOCAB:], head.mean(0).expand(GROWN - VOCAB, -1))
    # Only the replaced tables are new; flags and modes are kept.
    assert not any(p.requires_grad for p in grown.blocks[0].parameters())
    assert [m.training for m in grown.modules()] == [m.training for m in net.modules()]
    # What the params build now is exactly this tree (NNModel(net_params=...) accepts it).
    assert set(grown.state_dict()) == set(lm.TransformerNN(grown.params).state_dict())
    with torch.no_grad():
        was, now = net(IDS), grown(IDS)
    assert now.shape == (3, 6, GROWN)
    torch.testing.assert_close(now[..., :VOCAB], was, rtol=0, atol=1e-6)
    # A new token's logit is the mean of the old ones: greedy picks do not move.
    torch.testing.assert_close(now[..., VOCAB:], was.mean(-1, keepdim=True).expand(
        -1, -1, GROWN - VOCAB), rtol=0, atol=1e-6)
    assert torch.equal(now.argmax(-1), was.argmax(-1))


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_the_new_rows_are_what_transformers_resize_token_embeddings_gives(tied: bool) -> None:
    """transformers (mean_resizing, its default) samples new rows from N(mean, 1e-9·cov)
    of the old rows, or takes the mean itself when that covariance is singular: here
    (11 rows, width 16) it is, so both libraries give the same tables."""
    transformers = pytest.importorskip("transformers")
    net = transformer(tied=tied, width=16)
    config = transformers.LlamaConfig(vocab_size=VOCAB, hidden_size=16, intermediate_size=32,
                                      num_hidden_layers=1, num_attention_heads=2,
                                      tie_word_embeddings=tied)
    llama = transformers.LlamaForCausalLM(config)
    with torch.no_grad():
        llama.get_input_embeddings().weight.copy_(net.embed.weight)
        if not tied:
            llama.get_output_embeddings().weight.copy_(net.lm_head.weight)
    llama.resize_token_embeddings(GROWN)
    grown = expand_embedding(net, layer_name="embed", new_num_embeddings=GROWN)
    torch.testing.assert_close(grown.embed.weight, llama.get_input_embeddings().weight,
                               rtol=0, atol=1e-7)
    head = grown.embed if tied else grown.lm_head
    torch.testing.assert_close(head.weight, llama.get_output_embeddings().weight,
                               rtol=0, atol=1e-7)


def test_refusals_name_the_token_embedding_and_change_nothing() -> None:
    net = transformer(tied=False)
    before = snapshot(net)
    for name in ("lm_head", "blocks.0.attn.qkv", "nowhere"):
        with pytest.raises(SurgeryTargetError, match="must be its token embedding 'embed'"):
            expand_embedding(net, layer_name=name, new_num_embeddings=GROWN)
    with pytest.raises(SurgeryShapeError, match="must be larger"):
        expand_embedding(net, layer_name="embed", new_num_embeddings=VOCAB)
    net.lm_head = nn.Sequential(net.lm_head)  # a wrapped head would not grow
    wrapped = snapshot(net)
    with pytest.raises(SurgeryTargetError, match="lm_head is a Sequential"):
        expand_embedding(net, layer_name="embed", new_num_embeddings=GROWN)
    assert same(snapshot(net), wrapped) and before[1].keys() != wrapped[1].keys()

    class Custom(lm.TransformerNN):  # type: ignore[misc,name-defined]
        pass  # a subclass may compute its logits otherwise: the built-in-net refusal

    with pytest.raises(SurgeryTargetError, match="NNx built-in net"):
        expand_embedding(Custom(shape()), layer_name="embed", new_num_embeddings=GROWN)


def lm_model(vocab: int, tied: bool, seed: int = 0) -> NNModel:
    torch.manual_seed(seed)
    model: NNModel = lm_tasks.CausalLMModel(
        shape(vocab, tied=tied), NNModelParams(net=Nets.TRANSFORMER, device=Devices.CPU),
        task=lm_tasks.CausalLMTask(vocab_size=vocab))
    return model


def rows(high: int, low: int = 0, seed: int = 1) -> list[torch.Tensor]:
    ids = torch.randint(low, high, (6, 7), generator=torch.Generator().manual_seed(seed))
    return [ids[:3], ids[3:]]


def logits(model: NNModel, ids: torch.Tensor) -> torch.Tensor:
    """The causal-LM task reads the net directly (predict is for (batch, classes))."""
    with torch.no_grad():
        out: torch.Tensor = model.net.eval()(ids)
    return out


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_train_expand_refine_and_reload(tmp_path: Path, tied: bool) -> None:
    """train → from_checkpoint → expand → a model built from the grown params holding the
    grown net → refine on the new tokens → from_checkpoint gives the same outputs."""
    first = lm_model(VOCAB, tied).train(
        NNTrainParams(n_epochs=2, train_loader=rows(VOCAB), optim=sgd(0.5), seed=0),
        verbose=False, root=tmp_path / "pre")
    trained = NNModel.from_checkpoint(first.checkpoints_dir / "last.pt")
    grown = expand_embedding(trained.net, layer_name="embed", new_num_embeddings=GROWN)
    model = lm_model(GROWN, tied)
    model.net = grown  # the new params build exactly its tree, so train accepts it
    torch.testing.assert_close(logits(model, IDS)[..., :VOCAB], logits(trained, IDS),
                               rtol=0, atol=1e-6)
    run = model.train(NNTrainParams(n_epochs=2, train_loader=rows(GROWN, VOCAB - 2),
                                    optim=sgd(0.5), seed=1),
                      verbose=False, root=tmp_path / "refine")
    assert model.transforms == () and model.net is grown
    assert not torch.equal(grown.embed.weight[VOCAB:], grown.embed.weight[VOCAB].expand(
        GROWN - VOCAB, -1))  # the new rows trained apart
    rebuilt = NNModel.from_checkpoint(run.checkpoints_dir / "last.pt")
    assert rebuilt.net_params == grown.params and rebuilt.net_params.vocab_size == GROWN
    new_ids = torch.tensor([[VOCAB, GROWN - 1, 0, 3]])
    assert torch.equal(logits(rebuilt, new_ids), logits(model, new_ids))
