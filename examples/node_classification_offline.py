"""Node classification on a generated graph with nnx-graph (spec §3, §4.2, §13), offline.

A two-community stochastic block model: 240 nodes, each in one of two communities;
an edge joins two nodes of the same community with probability 0.08 and of different
communities with probability 0.005. A node's features are noise, shifted only weakly by
its community, so the features alone classify poorly: the edges carry the answer.

* The split is planned over node ids (``plan_split``, stratified by community), and the
  node masks come from ``resolve(...)``: plans split samples, never edges (§13.3), so
  every split passes messages over the whole graph and is scored on its own nodes.
* A GraphSAGE classifier trains on neighbour-sampled batches (``sampler="neighbor"``,
  pure torch: no pyg-lib or torch-sparse) to > 0.9 test accuracy.
* A run stopped after three epochs and resumed statefully ends with the same weights, bit
  for bit, as the run that never stopped: the sampler's generator is checkpointed, so
  the resumed epochs draw the same neighbours.
* The last checkpoint reloads through ``NNModel.from_checkpoint``, and ``predict_proba``
  names every row by its global node id.

    uv run python examples/node_classification_offline.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch

from nnx import (
    Callback,
    Checkpoints,
    Devices,
    Losses,
    Nets,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    ProbabilitySpec,
)
from nnx.data_splits import plan_split
from nnx.graph import NNGraphDataset

NODES, FEATURES, EPOCHS = 240, 16, 8


def two_communities(seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Features, an undirected edge index (both directions listed) and the community
    of every node."""
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(NODES, generator=g) < 0.5).long()
    p = torch.where(y[:, None] == y[None, :], 0.08, 0.005)
    upper = torch.triu(torch.rand(NODES, NODES, generator=g) < p, 1)
    src, dst = (upper | upper.T).nonzero(as_tuple=True)
    x = torch.randn(NODES, FEATURES, generator=g) + 0.2 * (2 * y[:, None].float() - 1)
    return x, torch.stack([src, dst]), y


def masks_from_plan(y: torch.Tensor) -> dict[str, torch.Tensor]:
    """A stratified plan over node ids, resolved to one boolean node mask per split."""
    node_ids = list(range(NODES))
    plan = plan_split(node_ids, strategy="stratified", labels=y.tolist(),
                      proportions=(0.4, 0.2, 0.4), seed=7)
    rows = plan.resolve(node_ids)
    masks = {}
    for split, positions in zip(("train", "val", "test"), rows, strict=True):
        mask = torch.zeros(NODES, dtype=torch.bool)
        mask[list(positions)] = True
        masks[f"{split}_mask"] = mask
    return masks


def dataset() -> NNGraphDataset:
    """A fresh dataset: its neighbour loaders' generators start from ``seed``."""
    x, edge_index, y = two_communities(seed=0)
    return NNGraphDataset(x, edge_index, y, **masks_from_plan(y), sampler="neighbor",
                          num_neighbors=(10, 5), batch_size=32, seed=0)


class StopAfterThree(Callback):
    """Stops a run after its third epoch: the interrupted half of a split run."""

    def on_epoch_end(self, ctx: Any) -> None:
        if ctx.epoch == 2:
            ctx.should_stop = True


def fit(root: Path, *, seed: int = 0, callbacks: list[Callback] | None = None,
        resume_from: str | None = None) -> tuple[NNModel, Any]:
    torch.manual_seed(seed)
    model = NNModel(NNParams(input_dim=FEATURES, output_dim=2, hidden_dims=(32,),
                             dropout_prob=0.1),
                    NNModelParams(net=Nets.GRAPH_SAGE, loss=Losses.CROSS_ENTROPY,
                                  device=Devices.CPU))
    ds = dataset()
    resume: dict[str, Any] = {} if resume_from is None else {
        "resume_from_run_id": resume_from, "resume_mode": "stateful",
        "resume_epochs": "planned"}
    params = NNTrainParams(n_epochs=EPOCHS, train_loader=ds.train_loader(),
                           val_loader=ds.val_loader(), scheduler=None, seed=0,
                           optim=NNOptimParams.builder().adamw(max_lr=1e-2).build(), **resume)
    return model, model.train(params, callbacks=callbacks, root=root, verbose=False)


def main() -> None:
    ds = dataset()
    print(f"graph: {ds.num_nodes} nodes, {ds.edge_index.shape[1]} directed edges; "
          + ", ".join(f"{s} {int(m.sum())} nodes" for s, m in ds.masks.items()))

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        straight, run = fit(root / "straight")
        accuracy = straight.evaluate(dataset().test_loader()).accuracy
        print(f"run {run.id}: test accuracy {accuracy:.3f}")
        assert accuracy > 0.9

        # Stop after three epochs, then resume statefully from another initialisation:
        # the checkpoint replaces the weights, the optimizer and every random stream.
        _, first = fit(root / "split", callbacks=[StopAfterThree()])
        resumed, _ = fit(root / "split", seed=5, resume_from=first.id)
        a, b = straight.net.state_dict(), resumed.net.state_dict()
        same = all(torch.equal(a[k], b[k]) for k in a)
        print(f"stopped after 3 of {EPOCHS} epochs and resumed: weights bit for bit equal "
              f"to the uninterrupted run: {same}")
        assert same

        last = NNCheckpoint.load(run.id, Checkpoints.LAST, root=root / "straight")
        reloaded = NNModel.from_checkpoint(last)
        test = dataset().test_loader()
        assert torch.equal(reloaded.predict(test).logits, straight.predict(test).logits)
        proba = reloaded.predict_proba(test, ProbabilitySpec(kind="categorical"))
        assert proba.sample_ids.tolist() == dataset().seed_ids("test").tolist()
        print("reloaded from LAST; predict_proba rows by node id:")
        for node, p in list(zip(proba.sample_ids.tolist(), proba.probabilities.tolist(),
                                strict=True))[:4]:
            print(f"  node {node:3d}: P(community 1) = {p[1]:.3f}")


if __name__ == "__main__":
    main()
