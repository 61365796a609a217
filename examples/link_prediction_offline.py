"""Link prediction with nnx.link_tasks (spec §26), offline, on a generated graph.

A graph of six communities: 120 nodes, dense inside each community, sparse across, node
features a noisy hint of the community. The split holds out edges, not nodes:

* ``split_links`` canonicalises and de-duplicates the edges, then cuts them into training,
  validation and test positives with a local generator; validation / test negatives are
  drawn once from the static complement and fixed in the manifest (``nnx.link-split/1``),
  which is saved, reloaded and replayed against the graph;
* ``split.message_edge_index()`` (training edges and their reverses) is the only graph the
  net passes messages over: no held-out edge ever leaks into it;
* ``link_predictor_spec`` builds the net (a GraphSAGE encoder, a dot-product decoder);
* ``LinkTask(split)`` trains on the training edges plus negatives re-drawn each epoch from
  (seed, epoch), validates on every validation candidate (exact AUROC / AP / BCE from the
  float64 logits) and ``MonitorSpec("auroc")`` elects BEST;
* test is scored once, after training: ``task.predict`` then ``link_metrics``.

    uv run python examples/link_prediction_offline.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from nnx import Devices, MonitorSpec, NNModel, NNModelParams, NNOptimParams, NNTrainParams
from nnx.link_tasks import LinkSplit, LinkTask, link_metrics, link_predictor_spec, split_links

N, COMMUNITIES, FEATURES, HIDDEN = 120, 6, 8, 16


def communities(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Undirected edges listed both ways (split_links keeps one of each pair) and features:
    each community's random centre plus noise."""
    g = torch.Generator().manual_seed(seed)
    community = torch.arange(N) % COMMUNITIES
    p = torch.where(community[:, None] == community[None, :], 0.3, 0.01)
    upper = torch.triu(torch.rand(N, N, generator=g) < p, 1)
    src, dst = (upper | upper.T).nonzero(as_tuple=True)
    centres = torch.randn(COMMUNITIES, FEATURES, generator=g)
    x = centres[community] + 0.5 * torch.randn(N, FEATURES, generator=g)
    return torch.stack([src, dst]), x


def main() -> None:
    edge_index, x = communities()
    split = split_links(edge_index, N, val=0.1, test=0.1, seed=0)
    print(split)

    # The guarantees the split makes, checked here rather than taken on trust.
    message = {tuple(e) for e in split.message_edge_index().t().tolist()}
    for role in ("val", "test"):
        held = {tuple(e) for e in split.positives[role].t().tolist()}
        assert not held & message and not {(v, u) for u, v in held} & message
    positives = {tuple(e) for p in split.positives.values() for e in p.t().tolist()}
    negatives = {tuple(e) for p in split.fixed_negatives.values() for e in p.t().tolist()}
    assert not positives & negatives

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "split.json"
        split.save(path)  # the manifest: format nnx.link-split/1
        assert LinkSplit.load(path).replay(edge_index) == split

        task = LinkTask(split)
        # The registered recipe: a GraphSAGE encoder (no activation after its last layer)
        # and a dot-product decoder, net(x, edge_index, edge_label_index) -> logits.
        spec = link_predictor_spec(input_dim=FEATURES, hidden_dims=[HIDDEN, HIDDEN],
                                   encoder="graph_sage", decoder="dot", seed=0)
        model = NNModel(params=NNModelParams(net=spec, device=Devices.CPU), task=task)
        params = NNTrainParams(
            n_epochs=20, train_loader=task.loader("train", x, 256),
            val_loader=task.loader("val", x, 256), seed=0, scheduler=None,
            optim=NNOptimParams.builder().adamw(max_lr=1e-2).build(),
            metrics=task.metric_specs(), monitor=MonitorSpec("auroc"))
        run = model.train(params, root=tmp, verbose=False)
        val = run.epoch_records()[-1].val_edp
        print(f"validation: AUROC {val.metrics['auroc']:.3f}  AP {val.metrics['ap']:.3f}  "
              f"BCE {val.metrics['bce']:.3f}  ({val.count} candidates)")

        prediction = task.predict(model, task.loader("test", x, 256))
        test = link_metrics(prediction.logits, prediction.targets, from_logits=True)
        print(f"test: AUROC {test.auroc:.3f}  AP {test.ap:.3f}  BCE {test.bce:.3f}  "
              f"({test.candidates} candidates, scored once after training)")
        assert test.auroc is not None and test.auroc > 0.8, test


if __name__ == "__main__":
    main()
