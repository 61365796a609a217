"""Model surgery end to end (spec §16): train, reload, grow, refine, reload again.

A small FeedFwd classifier is trained on synthetic blobs and reloaded from its LAST
checkpoint. nnx.surgery then widens its hidden layer and deepens it (Net2Net: the grown
net computes the same function, checked here), and the grown model is refined on the
same task. Because the surgery kept the net's params aligned with its layers, the
refined run reloads through NNModel.from_checkpoint like any other. A low-rank
factorization of the refined model's output layer shows the truncation error Eckart-Young
predicts, then refines and reloads too (its nnx.low_rank recipe recorded).

    uv run python examples/surgery_widen_deepen.py
"""

from __future__ import annotations

import tempfile

import torch

from nnx import NNModel, NNOptimParams, NNParams, NNTrainParams, set_seed
from nnx.surgery import deepen, low_rank_factorize, widen


def blobs(seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """192 draws from three fixed Gaussian blobs in 8-D, in batches of 32."""
    centres = torch.randn(3, 8, generator=torch.Generator().manual_seed(0)) * 1.5
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (192,), generator=g)
    x = centres[y] + torch.randn(192, 8, generator=g)
    return [(x[i:i + 32], y[i:i + 32]) for i in range(0, 192, 32)]


def plan(epochs: int, seed: int) -> NNTrainParams:
    optim = NNOptimParams.builder().adamw(max_lr=1e-2).build()
    return NNTrainParams(n_epochs=epochs, train_loader=blobs(0), optim=optim, seed=seed)


def count(model: NNModel) -> int:
    return sum(p.numel() for p in model.net.parameters())


def main(root: str) -> None:
    set_seed(0)
    small = NNModel(net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=(4,)))
    first = small.train(plan(3, 0), verbose=False, root=root)
    trained = NNModel.from_checkpoint(first.checkpoints_dir / "last.pt")
    x = torch.cat([b[0] for b in blobs(1)])

    grown_net = deepen(widen(trained.net, layer_name="layers.0", new_width=16),
                       after_layer_name="layers.0")
    grown = NNModel(net_params=grown_net.params, params=trained.params)
    grown.net = grown_net  # the new params build exactly its tree, so train accepts it
    gap = (grown.predict(x).logits - trained.predict(x).logits).abs().max().item()
    assert gap < 1e-5, gap  # function preserved
    before = grown.evaluate(blobs(1)).error

    second = grown.train(plan(6, 1), verbose=False, root=root)
    reloaded = NNModel.from_checkpoint(second.checkpoints_dir / "last.pt")
    assert torch.equal(reloaded.predict(x).logits, grown.predict(x).logits)
    after = grown.evaluate(blobs(1)).error

    # Given the model, low_rank_factorize returns a copy with core's nnx.low_rank recipe
    # recorded: the params still build a plain Linear, the recipe says it is factorized.
    compact = low_rank_factorize(grown, layer_name="layers.2", rank=1)
    weight = grown.net.layers[2].weight.detach()
    low = compact.net.layers[2]
    error = torch.linalg.matrix_norm(weight - low.up.weight @ low.down.weight).item()
    tail = torch.linalg.svdvals(weight.double())[1:].pow(2).sum().sqrt().item()
    assert abs(error - tail) < 1e-5, (error, tail)
    third = compact.train(plan(3, 2), verbose=False, root=root)
    again = NNModel.from_checkpoint(third.checkpoints_dir / "last.pt")
    assert again.transforms == compact.transforms
    assert torch.equal(again.predict(x).logits, compact.predict(x).logits)

    print(f"hidden dims {trained.net_params.hidden_dims} -> {grown.net_params.hidden_dims}; "
          f"parameters {count(trained)} -> {count(grown)}")
    print(f"grown net computes the same logits (max gap {gap:.1e}); held-out error "
          f"{before:.3f} before refining, {after:.3f} after")
    print("refined run reloads from its checkpoint with identical predictions")
    print(f"rank-1 output layer: Frobenius error {error:.4f} = sqrt(sum of the dropped "
          f"squared singular values) {tail:.4f}")
    print(f"the rank-1 model refines and reloads with its recipe ({compact.transforms[0].op}); "
          f"parameters {count(grown)} -> {count(compact)}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as root:
        main(root)
