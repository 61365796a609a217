"""A tiny end-to-end fine-tune: only the tuner's tensors move, and the loss goes down."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytest.importorskip("nnx.lm")

from nnx.lm import NNTransformerParams, TransformerNN
from nnx.peft import PrefixTuner, PromptTuner

VOCAB = 19


def _tuned(kind: str) -> tuple[TransformerNN, nn.Module]:
    torch.manual_seed(0)
    net = TransformerNN(NNTransformerParams(vocab_size=VOCAB, d_model=16, n_heads=2,
                                            n_layers=2, max_seq_len=24))
    with torch.no_grad():  # a "pretrained" net that reacts to its context, not near-uniform
        for p in net.parameters():
            if p.dim() > 1:
                p.normal_(std=0.3)
    net.train()  # as the built-in step would: the tuner copies this mode
    tuner = PromptTuner(net, 4, init="vocab") if kind == "prompt" else PrefixTuner(net, 4)
    return net, tuner


@pytest.mark.parametrize("kind", ["prompt", "prefix"])
def test_training_moves_only_the_tuner_and_lowers_the_loss(kind: str) -> None:
    net, tuner = _tuned(kind)
    assert tuner.training
    base = {k: v.clone() for k, v in net.state_dict().items()}
    owned = {n: p.detach().clone() for n, p in tuner.named_parameters() if p.requires_grad}
    # The optimizer sees every parameter (as NNModel's does); the frozen ones get no grad.
    opt = torch.optim.Adam(tuner.parameters(), lr=0.05)
    ids = torch.randint(0, VOCAB, (4, 9))
    inputs, targets = ids[:, :-1], ids[:, 1:]
    losses = []
    for _ in range(15):
        opt.zero_grad()
        loss = F.cross_entropy(tuner(inputs).reshape(-1, VOCAB), targets.reshape(-1))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.9 * losses[0], losses
    assert all(torch.equal(v, base[k]) for k, v in net.state_dict().items())
    now = dict(tuner.named_parameters())
    assert all(not torch.equal(now[n], before) for n, before in owned.items())
