"""Whole-graph classification with nnx.graph_tasks (spec §25), offline.

A generated collection: 160 small undirected graphs, sparse rings (class 0) and dense
graphs (class 1), each node's features its degree / 4 and noise; 8 graphs are flagged
unlabeled (their target is IGNORE: they count in no loss or metric). Nothing is
downloaded.

* ``GraphCollection`` checks every graph once; the split is ours, by graph id
  (``subset``): the collection never splits itself.
* ``graph_classifier_spec`` is the registered recipe (GCN encoder → mean pool → head);
  ``GraphClassifier`` is the Task-protocol object: every batch checked before training,
  loss and metrics averaged over labeled graphs, each predicted row named by its graph.
* The run resumes from its LAST checkpoint bit for bit, and the reloaded model predicts
  the same probabilities, keyed by graph id through a shuffled loader.

    uv run python examples/graph_classification_offline.py
"""

from __future__ import annotations

import tempfile
from typing import Any

import torch

from nnx import (
    Callback,
    Checkpoints,
    Devices,
    Losses,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    ProbabilitySpec,
)
from nnx.graph_tasks import GraphClassifier, GraphCollection, graph_classifier_spec

F = 4


def ring(n: int) -> torch.Tensor:
    src = torch.arange(n)
    dst = (src + 1) % n
    return torch.stack([torch.cat([src, dst]), torch.cat([dst, src])])


def dense(n: int, g: torch.Generator) -> torch.Tensor:
    adjacency = torch.zeros(n, n, dtype=torch.bool)
    adjacency[ring(n)[0], ring(n)[1]] = True  # a ring keeps it connected
    upper = torch.triu((torch.rand(n, n, generator=g) < 0.7) | adjacency, 1)
    src, dst = (upper | upper.T).nonzero(as_tuple=True)
    return torch.stack([src, dst])


def collection(count: int, seed: int) -> GraphCollection:
    g = torch.Generator().manual_seed(seed)
    graphs, targets = [], []
    for i in range(count):
        n = int(torch.randint(4, 12, (1,), generator=g))
        edges = ring(n) if i % 2 == 0 else dense(n, g)
        x = 0.1 * torch.randn(n, F, generator=g)
        x[:, 0] = torch.bincount(edges[0], minlength=n).float() / 4
        graphs.append((x, edges))
        targets.append(None if i % 20 == 19 else i % 2)
    ids = [1000 + 7 * i for i in range(count)]  # stable ids, not positions
    unlabeled = [gid for gid, t in zip(ids, targets, strict=True) if t is None]
    return GraphCollection(graphs, ids, targets, unlabeled=unlabeled)


class StopAt(Callback):
    """Stops a run after epoch ``epoch``: the first half of a run split there."""

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch

    def on_epoch_end(self, ctx: Any) -> None:
        if ctx.epoch == self.epoch:
            ctx.should_stop = True


def model(seed: int = 0) -> NNModel:
    spec = graph_classifier_spec(input_dim=F, num_classes=2, hidden_dims=(16, 16),
                                 encoder="graph_conv", pool="mean", seed=seed)
    return NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY,
                                        device=Devices.CPU), task=GraphClassifier(2))


def main() -> None:
    graphs = collection(160, seed=0)
    ids = list(graphs.ids)
    train, val, test = (graphs.subset(ids[:100]), graphs.subset(ids[100:130]),
                        graphs.subset(ids[130:]))

    def params(n_epochs: int, **fields: object) -> NNTrainParams:
        return NNTrainParams(n_epochs=n_epochs, seed=0, scheduler=None,
                             train_loader=train.loader(batch_size=16, shuffle=True, seed=1),
                             val_loader=val.loader(batch_size=16),
                             optim=NNOptimParams.builder().adamw(max_lr=2e-2).build(),
                             **fields)  # type: ignore[arg-type]

    with tempfile.TemporaryDirectory() as root:
        straight = model()
        full = straight.train(params(10), root=root, verbose=False)
        record = straight.evaluate(test.loader(batch_size=16))
        print(f"test accuracy {record.accuracy:.3f} over the labeled graphs "
              f"(loss {record.loss:.4f})")
        assert record.accuracy > 0.9

        # Stop the same plan after 5 epochs, then resume it: the weights end bit for bit
        # equal to the uninterrupted run's.
        half = model()
        first = half.train(params(10), callbacks=[StopAt(4)], root=root, verbose=False,
                           salt="half")
        resumed = model(seed=9)
        resumed.train(params(10, resume_from_run_id=first.id, resume_mode="stateful",
                             resume_epochs="planned"), root=root, verbose=False, salt="half")
        same = all(torch.equal(a, b) for a, b in zip(straight.net.state_dict().values(),
                                                     resumed.net.state_dict().values(),
                                                     strict=True))
        print("resumed run ends with the uninterrupted run's weights:", same)
        assert same

        # Reload from LAST (the recipe rebuilds the encoder, pool and head) and predict
        # through a shuffled loader: each row is named by its graph id.
        last = NNCheckpoint.load(full.id, Checkpoints.LAST, root=root)
        reloaded = NNModel.from_checkpoint(last, task=GraphClassifier(2))
        loader = test.loader(batch_size=8, shuffle=True, seed=5)
        result = reloaded.predict_proba(loader, ProbabilitySpec(kind="categorical"))
        expected = straight.predict_proba(test.loader(batch_size=30),
                                          ProbabilitySpec(kind="categorical"))
        by_id = dict(zip(expected.sample_ids.tolist(), expected.probabilities, strict=True))
        assert all(torch.allclose(p, by_id[gid], atol=1e-6)
                   for gid, p in zip(result.sample_ids.tolist(), result.probabilities,
                                     strict=True))
        for gid, p in list(zip(result.sample_ids.tolist(), result.probabilities,
                               strict=True))[:4]:
            print(f"graph {gid}: P(dense) = {float(p[1]):.3f}")


if __name__ == "__main__":
    main()
