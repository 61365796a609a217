"""NNGraphDataset(sampler="neighbor"): seeded neighbour sampling with no pyg-lib or
torch-sparse (spec §13, §14.3)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _graph_tiny import F, N, StopAfterTwo, two_communities

from nnx import (
    Devices,
    Losses,
    Nets,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNTrainParams,
    TaskSpec,
)
from nnx.graph import GraphSageNN, NNGraphDataset


def sampled(seed: int = 0, **options: Any) -> NNGraphDataset:
    ds = two_communities()
    options = {"num_neighbors": (3, 2), "batch_size": 8, **options}
    return NNGraphDataset(ds.x, ds.edge_index, ds.y, train_mask=ds.masks["train"],
                          val_mask=ds.masks["val"], test_mask=ds.masks["test"],
                          sampler="neighbor", seed=seed, **options)


def _edges(ds: NNGraphDataset) -> set[tuple[int, int]]:
    return set(map(tuple, ds.edge_index.T.tolist()))


def test_each_batch_is_its_seeds_first_and_real_edges_within_the_fan_outs() -> None:
    ds = sampled()
    real, in_degree = _edges(ds), torch.bincount(ds.edge_index[1], minlength=N)
    seen = []
    for inputs, y in ds.train_loader():
        ids = inputs.node_ids
        seeds = ids[inputs.seed]
        assert torch.equal(inputs.seed, torch.arange(len(y))) and torch.equal(y, ds.y[seeds])
        assert ids.unique().numel() == ids.numel()  # each node once
        glob = ids[inputs.edge_index]
        pairs = list(map(tuple, glob.T.tolist()))
        assert set(pairs) <= real and len(set(pairs)) == len(pairs)  # no edge twice
        into_seed = torch.bincount(inputs.edge_index[1], minlength=ids.numel())[:len(y)]
        assert torch.equal(into_seed, in_degree[seeds].clamp(max=3))  # hop 1: min(deg, 3)
        assert torch.equal(inputs.x, ds.x[ids])
        seen.append(seeds)
    assert sorted(torch.cat(seen).tolist()) == ds.seed_ids("train").tolist()


def test_batches_are_seeded_training_reshuffles_and_evaluation_repeats() -> None:
    one, same, other = sampled(), sampled(), sampled(seed=1)

    def passes(ds: NNGraphDataset, split: str) -> list[list[torch.Tensor]]:
        loader = ds.loader(split)
        assert loader is ds.loader(split)  # one loader per split, kept
        return [[b[0].node_ids for b in loader] for _ in range(2)]

    def equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
        return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))

    train = passes(one, "train")
    assert all(equal(a, b) for a, b in zip(train, passes(same, "train"), strict=True))
    assert not equal(train[0], train[1])  # the generator runs on between passes
    assert not equal(train[0], passes(other, "train")[0])
    val = passes(one, "val")
    assert equal(val[0], val[1])  # an evaluation loader reseeds every pass


def test_predict_proba_names_sampled_rows_by_node_id_in_the_pass_it_ran() -> None:
    torch.manual_seed(0)
    m = NNModel(NNParams(input_dim=F, output_dim=2),
                NNModelParams(net=Nets.GRAPH_SAGE, loss=Losses.CROSS_ENTROPY,
                              task=TaskSpec.categorical(2), device=Devices.CPU))
    for split in ("val", "train"):  # in seed order, and shuffled
        # A twin dataset (same seed) replays the first pass predict_proba runs.
        first_pass = [inputs.sample_ids() for inputs, _ in sampled().loader(split)]
        result = m.predict_proba(sampled().loader(split))
        assert result.sample_ids.tolist() == torch.cat(first_pass).tolist()
        assert sorted(result.sample_ids.tolist()) == sampled().seed_ids(split).tolist()


def test_with_every_neighbour_a_sage_layer_scores_seeds_as_on_the_full_graph() -> None:
    ds = sampled(num_neighbors=(N,), batch_size=7)
    torch.manual_seed(0)
    net = GraphSageNN(NNParams(input_dim=F, output_dim=2)).eval()
    full = net(ds.x, ds.edge_index)
    for inputs, _ in ds.val_loader():
        torch.testing.assert_close(net(inputs), full[inputs.sample_ids()])


def _fit(ds: NNGraphDataset, root: Any, n_epochs: int, seed: int = 0, **kw: Any):
    torch.manual_seed(seed)
    m = NNModel(NNParams(input_dim=F, output_dim=2, hidden_dims=(16,)),
                NNModelParams(net=Nets.GRAPH_SAGE, loss=Losses.CROSS_ENTROPY,
                              device=Devices.CPU))
    callbacks = kw.pop("callbacks", None)
    params = NNTrainParams(n_epochs=n_epochs, train_loader=ds.train_loader(),
                           val_loader=ds.val_loader(), scheduler=None, seed=0,
                           optim=NNOptimParams.builder().adamw(max_lr=1e-2).build(), **kw)
    return m, m.train(params, callbacks=callbacks, root=root, verbose=False)


def test_a_sampled_run_learns_and_resumes_bit_for_bit(tmp_path) -> None:
    straight, full = _fit(sampled(), tmp_path / "a", 4)
    _, first = _fit(sampled(), tmp_path / "b", 4, callbacks=[StopAfterTwo()])
    # A fresh dataset: its generators start over; the checkpoint's state replaces them.
    resumed, again = _fit(sampled(), tmp_path / "b", 4, seed=5,
                          resume_from_run_id=first.id, resume_mode="stateful",
                          resume_epochs="planned")
    rows = [[i.state() for i in NNRun.load(r.id, root=root).idps]
            for r, root in ((first, tmp_path / "b"), (again, tmp_path / "b"),
                            (full, tmp_path / "a"))]
    assert rows[0] + rows[1] == rows[2]
    a, b = straight.net.state_dict(), resumed.net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    trained, _ = _fit(sampled(), tmp_path / "c", 30)
    assert trained.evaluate(sampled().test_loader()).accuracy > 0.9


def test_the_sampler_options_are_checked() -> None:
    with pytest.raises(ValueError, match="num_neighbors"):
        sampled(num_neighbors=())
    with pytest.raises(ValueError, match=r"num_neighbors\[1\]"):
        sampled(num_neighbors=(2, 0))
    with pytest.raises(ValueError, match="batch_size"):
        sampled(batch_size=0)
    with pytest.raises(ValueError, match="seed"):
        sampled(seed=-1)
