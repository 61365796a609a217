"""A tiny LM policy and preference triples shared by the DPO tests (needs nnx-lm)."""

from __future__ import annotations

import torch

from nnx import Nets, NNModelParams, NNOptimParams, NNTrainParams

V, PAD = 13, 0
TRIPLES = [
    ([1, 2, 3], [4, 5], [6]),
    ([7], [8, 9, 10, 11], [12, 2]),
    ([3, 3], [5], [9, 8, 7]),
    ([2, 4, 6, 8], [1], [11, 12]),
]


def policy(seed: int = 0):  # -> GenerativeNNModel
    from nnx.lm import GenerativeNNModel, NNTransformerParams

    torch.manual_seed(seed)
    shape = NNTransformerParams(vocab_size=V, d_model=16, n_heads=2, n_layers=1, max_seq_len=16)
    return GenerativeNNModel(net_params=shape, params=NNModelParams(net=Nets.TRANSFORMER))


def sgd(lr: float = 0.1) -> NNOptimParams:
    return NNOptimParams.builder().sgd(max_lr=lr).build()


def plan(loader, n_epochs: int = 1, **kwargs: object) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=loader,
                         optim=kwargs.pop("optim", sgd()), seed=0, **kwargs)  # type: ignore


def row_log_prob(net, prompt, completion) -> torch.Tensor:
    """Written out: Σ_j log softmax(net(prompt ‖ completion))[j − 1][token j] over the
    completion's positions j, on the unpadded row alone."""
    seq = torch.tensor([list(prompt) + list(completion)])
    logp = torch.log_softmax(net(seq)[0].float(), dim=-1)
    return sum((logp[j - 1, seq[0, j]] for j in range(len(prompt), seq.shape[1])),
               torch.tensor(0.0))
