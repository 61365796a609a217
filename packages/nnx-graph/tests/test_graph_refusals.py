"""What refuses graph-level data (spec §25): node-level nets, NNGraphDataset, ONNX
export of a graph classifier, and malformed batches on every path, each by a named
error before anything changes."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from _graph_families import F, families
from torch_geometric.data import Batch, Data

from nnx import (
    Devices,
    Losses,
    Nets,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
)
from nnx.graph import GraphLevelBatchError, NNGraphDataset
from nnx.graph_tasks import (
    CrossGraphEdgeError,
    GraphClassifier,
    GraphExportRefused,
    GraphTargetError,
    graph_classifier_spec,
)

COLL = families(6)


def classifier() -> NNModel:
    spec = graph_classifier_spec(input_dim=F, num_classes=2, hidden_dims=(8,))
    return NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY,
                                        device=Devices.CPU), task=GraphClassifier(2))


def weights(m: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in m.net.state_dict().items()}


def unchanged(m: NNModel, before: dict[str, torch.Tensor]) -> bool:
    return all(torch.equal(v, before[k]) for k, v in m.net.state_dict().items())


def train_params(batches) -> NNTrainParams:
    return NNTrainParams(n_epochs=1, train_loader=batches, scheduler=None,
                         optim=NNOptimParams.builder().adamw(max_lr=1e-2).build())


@pytest.mark.parametrize("net", ["GRAPH_CONV", "GRAPH_SAGE", "GRAPH_ATT"])
def test_node_level_nets_refuse_collection_batches(tmp_path, net: str) -> None:
    m = NNModel(NNParams(input_dim=F, output_dim=2, hidden_dims=(8,)),
                NNModelParams(net=Nets[net], loss=Losses.CROSS_ENTROPY, device=Devices.CPU))
    before = weights(m)
    loader = COLL.loader(batch_size=3)
    with pytest.raises(GraphLevelBatchError, match=f"{m.net.__class__.__name__} is node-level"):
        m.predict(loader)
    with pytest.raises(GraphLevelBatchError):
        m.evaluate(loader)
    with pytest.raises(GraphLevelBatchError):
        m.train(train_params(loader), root=tmp_path, verbose=False)
    assert unchanged(m, before)
    # Refused at the first forward, before any update; no run directory is left (only
    # the runs root's own lock files).
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []


def test_nngraphdataset_refuses_a_collection_or_a_batch_of_several_graphs() -> None:
    y = torch.zeros(4, dtype=torch.long)
    mask = torch.ones(4, dtype=torch.bool)
    with pytest.raises(GraphLevelBatchError, match="NNGraphDataset is node-level"):
        NNGraphDataset(COLL, COLL.graph(100)[1], y, train_mask=mask)  # type: ignore[arg-type]
    with pytest.raises(GraphLevelBatchError, match="NNGraphDataset is node-level"):
        NNGraphDataset(COLL.batch([100, 101])[0], COLL.graph(100)[1], y,  # type: ignore[arg-type]
                       train_mask=mask)
    graphs = [Data(x=torch.ones(2, F), edge_index=torch.tensor([[0], [1]]),
                   y=torch.zeros(2, dtype=torch.long), train_mask=torch.ones(2, dtype=torch.bool))
              for _ in range(2)]
    with pytest.raises(GraphLevelBatchError, match=r"NNGraphDataset\.from_data is node-level"):
        NNGraphDataset.from_data(Batch.from_data_list(graphs))
    assert NNGraphDataset.from_data(graphs[0]).num_nodes == 2  # one graph is fine


def test_onnx_export_of_a_graph_classifier_is_refused_before_anything_is_written(
        tmp_path) -> None:
    m = classifier()
    inputs = COLL.batch([100, 101])[0]
    target = tmp_path / "graph.onnx"
    for example in (inputs, (inputs.x, inputs.edge_index), inputs.x):
        with pytest.raises(GraphExportRefused, match="ONNX export is refused"):
            m.to_onnx(target, example)
    assert list(tmp_path.iterdir()) == []
    saved = m.export_state_dict(tmp_path / "weights.pt")
    state = torch.load(saved, weights_only=True)
    assert state.keys() == m.net.state_dict().keys()


def test_a_malformed_batch_is_refused_on_every_path_before_any_change(tmp_path) -> None:
    m = classifier()
    before = weights(m)
    inputs, y = COLL.batch([100, 101])
    crossing = type(inputs)(inputs.x, torch.tensor([[0], [int(inputs.ptr[1])]]), inputs.batch,
                            inputs.ptr, inputs.graph_id)
    with pytest.raises(CrossGraphEdgeError):
        m.predict([(crossing, y)])
    with pytest.raises(CrossGraphEdgeError):
        m.evaluate([(crossing, y)])
    with pytest.raises(GraphTargetError, match="2 graph"):
        m.evaluate([(inputs, y[:1])])
    # The task checks every training batch before anything is built: no run directory.
    with pytest.raises(CrossGraphEdgeError):
        m.train(train_params([(crossing, y)]), root=tmp_path / "runs", verbose=False)
    with pytest.raises(GraphTargetError, match=r"outside 0\.\.1"):
        m.train(train_params([(inputs, y + 5)]), root=tmp_path / "runs", verbose=False)
    assert not Path(tmp_path / "runs").exists()
    assert unchanged(m, before)
