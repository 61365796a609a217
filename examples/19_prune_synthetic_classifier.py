"""Magnitude pruning and fine-tuning on synthetic classification data (spec §16).

A FeedFwd classifier is trained, then ``magnitude_prune`` zeroes exactly 80 % of its
Linear weights (the smallest |w| over the whole net) with ``bake=True``: the state_dict
keeps the unpruned net's keys. A short fine-tune recovers accuracy; it also moves the
pruned weights off zero, so the net is pruned again at the end (the usual
prune → fine-tune → prune loop). The script asserts the exact sparsity, the recovered
accuracy, and that the saved weights load into a stock FeedFwd under ``strict=True``.
``NNModel.train`` refuses a built-in net still carrying torch's masks (``bake=False``).

    uv run python examples/19_prune_synthetic_classifier.py
"""

from __future__ import annotations

import os
import tempfile

import torch
from torch import nn

from nnx import NNModel, NNOptimParams, NNParams, NNTrainParams, set_seed
from nnx.extend import UnreloadableNetError
from nnx.prune import magnitude_prune

AMOUNT = 0.8


def blobs(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Three Gaussian blobs in 16-D (the same centres for every seed), batches of 32."""
    centres = torch.randn(3, 16, generator=torch.Generator().manual_seed(7)) * 0.6
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (384,), generator=g)
    x = centres[y] + torch.randn(384, 16, generator=g)
    return [(x[i:i + 32], y[i:i + 32]) for i in range(0, 384, 32)]


def train(model: NNModel, epochs: int, seed: int, root: str) -> None:
    model.train(NNTrainParams(n_epochs=epochs, train_loader=blobs(seed), seed=seed,
                              optim=NNOptimParams.builder().adamw(max_lr=3e-3).build()),
                verbose=False, root=root)


def sparsity(net: nn.Module) -> float:
    weights = torch.cat([m.weight.detach().reshape(-1) for m in net.modules()
                         if isinstance(m, nn.Linear)])
    return float((weights == 0).float().mean())


def main(root: str) -> None:
    set_seed(0)
    params = NNParams(input_dim=16, output_dim=3, hidden_dims=(128, 128))
    model = NNModel(net_params=params)
    train(model, 6, 0, root)
    test = blobs(99)
    dense = model.evaluate(test).accuracy
    keys = list(model.net.state_dict())

    magnitude_prune(model.net, AMOUNT)
    pruned = model.evaluate(test).accuracy
    train(model, 3, 1, root)  # fine-tune the baked net like any built-in net
    magnitude_prune(model.net, AMOUNT)  # the fine-tune regrew some zeros: prune again
    tuned = model.evaluate(test).accuracy
    print(f"accuracy dense {dense:.3f}, pruned {pruned:.3f}, pruned + fine-tuned {tuned:.3f}")
    print(f"weight sparsity {sparsity(model.net):.3f}")
    assert dense is not None and tuned is not None
    assert list(model.net.state_dict()) == keys
    assert abs(sparsity(model.net) - AMOUNT) < 1e-3
    assert tuned >= dense - 0.05

    stock = NNModel(net_params=params).net  # stock code, a fresh FeedFwd
    stock.load_state_dict(model.net.state_dict(), strict=True)

    masked = NNModel(net_params=params)
    magnitude_prune(masked.net, AMOUNT, bake=False)  # torch's masks stay on the net
    try:
        train(masked, 1, 2, root)
    except UnreloadableNetError as exc:
        print(f"refused: {str(exc)[:72]}...")
    else:
        raise AssertionError("a net carrying masks must be refused")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        main(os.path.join(tmp, "runs"))
