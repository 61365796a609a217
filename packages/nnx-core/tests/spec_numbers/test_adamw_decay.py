"""The spec's worked AdamW step (§3.1 Optimizers): with lr=0.1, weight_decay=0.2,
betas=(0, 0) and a zero gradient, a weight of 2.0 becomes 1.96 under AdamW but 1.9 under Adam."""

from __future__ import annotations

import pytest
import torch
from _support.optimizers import single_weight

from nnx import NNOptimParams, Optims, build_optimizer


@pytest.mark.parametrize(("name", "expected"), [(Optims.ADAMW, 1.96), (Optims.ADAM, 1.9)])
def test_adamw_decays_decoupled_adam_coupled(name, expected):
    # lr=0.1, weight_decay=0.2, betas=(0, 0), zero gradient: 2.0 → 1.96 (AdamW), 1.9 (Adam).
    module, w = single_weight(2.0)
    params = NNOptimParams(name=name, max_lr=0.1, weight_decay=0.2, momentum=(0.0, 0.0))
    opt = build_optimizer(module, params)
    w.grad = torch.zeros(1)
    opt.step()
    assert torch.equal(w.detach(), torch.tensor([expected], dtype=torch.float32))
