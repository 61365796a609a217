"""Node classification end to end (issue 39): a graph net trains on NNGraphDataset's
full-batch lists (spec §4.2) to > 0.9 accuracy, resumes bit for bit and reloads; seed
rows are sliced and predict_proba names them by global node id (§3.1)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from _graph_tiny import F, N, StopAfterTwo, two_communities

from nnx import (
    Checkpoints,
    Devices,
    Losses,
    Nets,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNTrainerParams,
    NNTrainParams,
    ProbabilitySpec,
    Trainer,
)
from nnx.data_splits import SplitManifest, plan_split
from nnx.graph import NNGraphDataset
from nnx.objectives import supervised_objective

DS = two_communities()


def model(net: str = "GRAPH_CONV", seed: int = 0) -> NNModel:
    torch.manual_seed(seed)
    # Dropout makes the torch RNG part of what a resume must restore.
    shape = NNParams(input_dim=F, output_dim=2, hidden_dims=(16,), dropout_prob=0.2)
    return NNModel(shape, NNModelParams(net=Nets[net], loss=Losses.CROSS_ENTROPY,
                                        device=Devices.CPU))


def params(n_epochs: int, **fields: Any) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=DS.train_loader(),
                         val_loader=DS.val_loader(), scheduler=None, seed=0,
                         optim=NNOptimParams.builder().adamw(max_lr=1e-2).build(), **fields)


def records(run: NNRun) -> list[dict[str, Any]]:
    return [idp.state() for idp in run.idps]


def weights(m: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in m.net.state_dict().items()}


def test_the_full_sampler_gives_one_batch_of_the_whole_graph_scored_on_its_seeds() -> None:
    (batch,) = DS.train_loader()
    inputs, y = batch
    assert inputs.x.shape == (N, F) and inputs.edge_index is DS.edge_index
    assert torch.equal(inputs.sample_ids(), DS.seed_ids("train"))
    assert torch.equal(y, DS.y[DS.seed_ids("train")]) and len(inputs) == N // 3


@pytest.mark.parametrize("net", ["GRAPH_CONV", "GRAPH_SAGE", "GRAPH_ATT"])
def test_a_node_classifier_learns_two_communities(tmp_path, net: str) -> None:
    m = model(net)
    m.train(params(30), root=tmp_path, verbose=False)
    test = DS.test_loader()
    assert float((m.predict(test).classes == test[0][1]).float().mean()) > 0.9
    assert m.evaluate(test).accuracy > 0.9


def test_predict_proba_names_seed_rows_by_global_node_id_through_concatenation() -> None:
    m = model()
    both = DS.test_loader() + DS.val_loader()
    result = m.predict_proba(both, ProbabilitySpec(kind="categorical"))
    expected = torch.cat([DS.seed_ids("test"), DS.seed_ids("val")])
    assert result.sample_ids.tolist() == expected.tolist()
    assert result.probabilities.shape == (len(expected), 2)


def test_a_run_split_at_an_epoch_resumes_bit_for_bit_and_reloads(tmp_path) -> None:
    straight = model()
    full = straight.train(params(4), root=tmp_path / "a", verbose=False)
    first = model()  # planned for 4 epochs, stopped after 2
    run = first.train(params(4), callbacks=[StopAfterTwo()], root=tmp_path / "b",
                      verbose=False)
    resumed = model(seed=5)  # other weights: the checkpoint must replace them
    again = resumed.train(params(4, resume_from_run_id=run.id, resume_mode="stateful",
                                 resume_epochs="planned"), root=tmp_path / "b", verbose=False)
    joined = records(NNRun.load(run.id, root=tmp_path / "b")) + records(
        NNRun.load(again.id, root=tmp_path / "b"))
    assert joined == records(NNRun.load(full.id, root=tmp_path / "a"))
    end, other = weights(straight), weights(resumed)
    assert end.keys() == other.keys() and all(torch.equal(end[k], other[k]) for k in end)
    # Reload: the checkpoint rebuilds the same net through Nets.GRAPH_CONV.
    last = NNCheckpoint.load(full.id, Checkpoints.LAST, root=tmp_path / "a")
    reloaded = NNModel.from_checkpoint(last)
    test = DS.test_loader()
    assert torch.equal(reloaded.predict(test).logits, straight.predict(test).logits)


def test_the_dataset_refuses_a_bad_graph_before_keeping_anything() -> None:
    x, edge_index, y = DS.x, DS.edge_index, DS.y
    mask = DS.masks["train"]
    with pytest.raises(ValueError, match="sampler must be one of 'full'"):
        NNGraphDataset(x, edge_index, y, train_mask=mask, sampler="neighbour")
    with pytest.raises(ValueError, match=r"outside 0\.\.89"):
        NNGraphDataset(x, edge_index + N, y, train_mask=mask)
    with pytest.raises(ValueError, match="train_mask must be a boolean tensor"):
        NNGraphDataset(x, edge_index, y, train_mask=mask.long())
    with pytest.raises(ValueError, match="val_mask selects no node"):
        NNGraphDataset(x, edge_index, y, train_mask=mask, val_mask=torch.zeros_like(mask))
    with pytest.raises(ValueError, match="one integer label per node"):
        NNGraphDataset(x, edge_index, y.float(), train_mask=mask)
    with pytest.raises(ValueError, match="has no test_mask"):
        NNGraphDataset(x, edge_index, y, train_mask=mask).test_loader()


def test_a_split_planned_over_node_ids_gives_the_masks_and_never_splits_edges() -> None:
    # §13.3: plans split samples (here graph nodes), never edges: the masks come from
    # resolve(...) over the node ids, and every split's batch carries the whole graph.
    node_ids = [f"n{i}" for i in range(N)]
    plan = plan_split(node_ids, strategy="stratified", labels=DS.y.tolist(),
                      proportions=(0.5, 0.25, 0.25), seed=3)
    replayed = SplitManifest.from_json(plan.to_json())

    def masks(manifest: SplitManifest) -> dict[str, torch.Tensor]:
        out = {}
        for split, rows in zip(("train", "val", "test"), manifest.resolve(node_ids),
                               strict=True):
            mask = torch.zeros(N, dtype=torch.bool)
            mask[list(rows)] = True
            out[f"{split}_mask"] = mask
        return out

    planned = masks(plan)
    assert all(torch.equal(planned[k], v) for k, v in masks(replayed).items())
    ds = NNGraphDataset(DS.x, DS.edge_index, DS.y, **planned)
    seeds = {s: set(ds.seed_ids(s).tolist()) for s in ("train", "val", "test")}
    assert seeds["train"] == {node_ids.index(i) for i in plan.train}
    assert set.union(*seeds.values()) == set(range(N)) and sum(map(len, seeds.values())) == N
    for split in ("train", "val", "test"):
        ((inputs, _),) = ds.loader(split)
        assert inputs.edge_index is DS.edge_index and inputs.x.shape == (N, F)


def test_trainer_train_takes_the_full_batch_lists_and_resumes_bit_for_bit(tmp_path) -> None:
    def fit(root: Any, n_epochs: int, seed: int = 0,
            resume_from: str | None = None) -> tuple[NNModel, NNRun]:
        m = model(seed=seed)
        builder = (NNTrainerParams.builder().n_epochs(n_epochs).train_loader(DS.train_loader())
                   .val_loader(DS.val_loader()).seed(0)
                   .optimizer("main", NNOptimParams.builder().adamw(max_lr=1e-2).build()))
        if resume_from is not None:  # a Trainer trains n_epochs more epochs
            builder = builder.resume_from(resume_from)
        return m, Trainer(m).train(params=builder.build(), objective=supervised_objective(),
                                   root=root, verbose=False)

    straight, full = fit(tmp_path / "a", 4)
    _, first = fit(tmp_path / "b", 2)
    resumed, again = fit(tmp_path / "b", 2, seed=5, resume_from=first.id)
    assert records(first) + records(again) == records(full)
    end, other = weights(straight), weights(resumed)
    assert end.keys() == other.keys() and all(torch.equal(end[k], other[k]) for k in end)
