"""NNGraphDataset(sampler="neighbor"): seeded neighbour sampling with no pyg-lib or
torch-sparse (spec §13, §14.3)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
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
    NNTrainerParams,
    NNTrainParams,
    TaskSpec,
    Trainer,
)
from nnx.graph import GraphInputs, GraphSageNN, NeighborLoader, NNGraphDataset
from nnx.objectives import supervised_objective


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


# -- §4.2 / §13: resumed and repeated fits draw what the spec says ---------------------------
class Recording(NeighborLoader):
    """A training NeighborLoader that keeps the node ids of every batch of every pass."""

    def __init__(self, ds: NNGraphDataset) -> None:
        super().__init__(ds.x, ds.edge_index, ds.y, ds.seed_ids("train"),
                         num_neighbors=ds.num_neighbors, batch_size=ds.batch_size,
                         shuffle=True, seed=ds.seed)
        self.passes: list[list[list[int]]] = []

    def __iter__(self) -> Iterator[tuple[GraphInputs, torch.Tensor]]:
        self.passes.append([])
        for inputs, y in super().__iter__():
            self.passes[-1].append(inputs.node_ids.tolist())
            yield inputs, y


def _drawn_fit(root: Any, owner: str, n_epochs: int, *, seed: int = 0,
               resume_from: str | None = None, stop_after_two: bool = False
               ) -> tuple[NNModel, Any, Recording]:
    torch.manual_seed(seed)
    m = NNModel(NNParams(input_dim=F, output_dim=2, hidden_dims=(8,), dropout_prob=0.2),
                NNModelParams(net=Nets.GRAPH_SAGE, loss=Losses.CROSS_ENTROPY,
                              device=Devices.CPU))
    ds = sampled()
    train = Recording(ds)
    optim = NNOptimParams.builder().adamw(max_lr=1e-2).build()
    if owner == "trainer":  # a Trainer trains n_epochs more epochs when it resumes
        builder = (NNTrainerParams.builder().n_epochs(n_epochs).train_loader(train)
                   .val_loader(ds.val_loader()).seed(0).optimizer("main", optim))
        if resume_from is not None:
            builder = builder.resume_from(resume_from)
        run = Trainer(m).train(params=builder.build(), objective=supervised_objective(),
                               root=root, verbose=False)
        return m, run, train
    resume: dict[str, Any] = {} if resume_from is None else {
        "resume_from_run_id": resume_from, "resume_mode": "stateful",
        "resume_epochs": "planned"}
    params = NNTrainParams(n_epochs=n_epochs, train_loader=train, val_loader=ds.val_loader(),
                           scheduler=None, seed=0, optim=optim, **resume)
    run = m.train(params, callbacks=[StopAfterTwo()] if stop_after_two else None, root=root,
                  verbose=False)
    return m, run, train


@pytest.mark.parametrize("owner", ["model", "trainer"])
def test_a_resumed_run_draws_the_neighbours_the_uninterrupted_run_drew(tmp_path,
                                                                       owner: str) -> None:
    # NNModel.train and Trainer.train alike (§4.2): the loader's generator is checkpointed,
    # so epochs 2 and 3 of the resumed run sample the subgraphs of the straight run's.
    straight, _, whole = _drawn_fit(tmp_path / "a", owner, 4)
    first_half = 2 if owner == "trainer" else 4
    _, first, head = _drawn_fit(tmp_path / "b", owner, first_half, stop_after_two=True)
    resumed, _, tail = _drawn_fit(tmp_path / "b", owner, 2 if owner == "trainer" else 4,
                                  seed=5, resume_from=first.id)
    assert len(whole.passes) == 4 and head.passes + tail.passes == whole.passes
    a, b = straight.net.state_dict(), resumed.net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_second_fit_continues_the_generator_and_a_rebuilt_dataset_repeats(tmp_path) -> None:
    # §13: NNTrainParams.seed reseeds the global streams only; the loader's own generator
    # runs on across train() calls, and a rebuilt dataset starts it over.
    ds = sampled()
    passes = []
    for i, data in enumerate((ds, ds, sampled())):
        _fit(data, tmp_path / str(i), 1)
        passes.append([inputs.node_ids.tolist() for inputs, _ in [
            next(iter(data.train_loader()))]])
    assert passes[0] != passes[1]  # the second fit went on from the first's state
    assert passes[2] == passes[0]  # a fresh dataset draws the first fit's next pass again


def test_reseeding_the_loaders_generator_repeats_a_fit(tmp_path) -> None:
    # §13: instead of rebuilding the dataset, reseed its training loader's generator
    # before the next fit: the same shuffles and neighbours, so the same weights.
    ds = sampled()
    first, _ = _fit(ds, tmp_path / "a", 2)
    loader = ds.train_loader()
    loader.generator.manual_seed(loader.generator.initial_seed())
    again, _ = _fit(ds, tmp_path / "b", 2)
    a, b = first.net.state_dict(), again.net.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    drifted, _ = _fit(ds, tmp_path / "c", 2)  # not reseeded: the generator ran on
    assert not all(torch.equal(a[k], v) for k, v in drifted.net.state_dict().items())


def test_iter_predict_names_sampled_rows_by_node_id_without_the_shuffle_warning() -> None:
    # §21 / §3.1: each streamed batch carries its seeds' global node ids, also from the
    # shuffling training loader, and never warns as a shuffled DataLoader would.
    torch.manual_seed(0)
    m = NNModel(NNParams(input_dim=F, output_dim=2),
                NNModelParams(net=Nets.GRAPH_SAGE, loss=Losses.CROSS_ENTROPY,
                              task=TaskSpec.categorical(2), device=Devices.CPU))
    for split in ("val", "train"):
        first_pass = [inputs.sample_ids().tolist() for inputs, _ in sampled().loader(split)]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with m.iter_predict(sampled().loader(split)) as stream:
                streamed = [batch.sample_ids.tolist() for batch in stream]
        assert streamed == first_pass
