"""Link batches outside LinkTask (spec §26 "Batch roles"): the default train / evaluate /
predict paths, node-level nets and the graph-pooling classifier refuse them by name,
before any update, leaving no run directory and every weight as it was."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from _link_tiny import DotNet, F, a_split, plan, same, weights

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
from nnx.graph import GraphAttNN, GraphConvNN, GraphSageNN, LinkLevelBatchError
from nnx.graph_tasks import GraphClassifier, graph_classifier_spec
from nnx.link_tasks import LinkTask

NODE_NETS = {"GRAPH_CONV": GraphConvNN, "GRAPH_SAGE": GraphSageNN, "GRAPH_ATT": GraphAttNN}


def runs(root: Path) -> list[str]:
    """What a refused fit left under the runs root (its own lock files aside)."""
    return [p.name for p in root.iterdir() if not p.name.startswith(".")] if root.exists() \
        else []


def default_params(loader: Any) -> NNTrainParams:
    return NNTrainParams(n_epochs=1, train_loader=loader, scheduler=None,
                         optim=NNOptimParams.builder().sgd(max_lr=0.01).build())


def refused_on_every_default_path(m: NNModel, task: LinkTask, x: torch.Tensor,
                                  root: Path, error: type[Exception], match: str) -> None:
    before = weights(m)
    with pytest.raises(error, match=match):
        m.train(default_params(task.loader("train", x, 8)), root=root, verbose=False)
    with pytest.raises(error, match=match):
        m.evaluate(task.loader("val", x, 8))
    with pytest.raises(error, match=match):
        m.predict(task.loader("test", x, 8))
    assert same(weights(m), before) and runs(root) == []


def refused_under_the_link_task(m: NNModel, task: LinkTask, x: torch.Tensor, root: Path,
                                match: str) -> None:
    """The task's objective and ``task.predict`` reach the net, which refuses the call."""
    before = weights(m)
    with pytest.raises(LinkLevelBatchError, match=match):
        m.train(plan(task, x), root=root, verbose=False)
    with pytest.raises(LinkLevelBatchError, match=match):
        task.predict(m, task.loader("test", x, 8))
    assert same(weights(m), before) and runs(root) == []


@pytest.mark.parametrize("net", sorted(NODE_NETS))
def test_node_level_nets_refuse_link_batches_on_the_default_paths(tmp_path, net: str) -> None:
    split, _, x = a_split()
    m = NNModel(NNParams(input_dim=F, output_dim=2, hidden_dims=(8,)),
                NNModelParams(net=Nets[net], loss=Losses.CROSS_ENTROPY, device=Devices.CPU))
    refused_on_every_default_path(m, LinkTask(split), x, tmp_path, LinkLevelBatchError,
                                  f"{NODE_NETS[net].__name__} is node-level")


@pytest.mark.parametrize("net", sorted(NODE_NETS))
def test_a_link_task_refuses_a_node_level_net_before_any_update(tmp_path, net: str) -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    module = NODE_NETS[net](NNParams(input_dim=F, output_dim=1, hidden_dims=(8,)))
    m = NNModel(module=module, params=NNModelParams(device=Devices.CPU), task=task)
    refused_under_the_link_task(m, task, x, tmp_path, f"{module.__class__.__name__} is node-level")


def classifier(task: Any) -> NNModel:
    spec = graph_classifier_spec(input_dim=F, num_classes=2, hidden_dims=(8,))
    return NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY,
                                        device=Devices.CPU), task=task)


def test_the_graph_classifier_refuses_link_batches_on_the_default_paths(tmp_path) -> None:
    split, _, x = a_split()
    refused_on_every_default_path(classifier(GraphClassifier(2)), LinkTask(split), x,
                                  tmp_path, LinkLevelBatchError, "is graph-level")
    # Without the GraphClassifier task the net itself refuses them (TaskSpec form, §25).
    spec = graph_classifier_spec(input_dim=F, num_classes=2, hidden_dims=(8,))
    bare = NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY,
                                        device=Devices.CPU))
    refused_on_every_default_path(bare, LinkTask(split), x, tmp_path / "bare",
                                  LinkLevelBatchError, "GraphClassifierNet is graph-level")


def test_a_link_task_refuses_the_graph_classifier_before_any_update(tmp_path) -> None:
    split, _, x = a_split()
    task = LinkTask(split)
    refused_under_the_link_task(classifier(task), task, x, tmp_path,
                                "GraphClassifierNet is graph-level")


def test_a_link_net_without_its_task_is_refused_on_every_default_path(tmp_path) -> None:
    # No LinkTask, so nothing can check the batches: the default paths do not take them.
    split, _, x = a_split()
    m = NNModel(module=DotNet(), params=NNModelParams(loss=Losses.BINARY_CROSS_ENTROPY,
                                                      device=Devices.CPU))
    refused_on_every_default_path(m, LinkTask(split), x, tmp_path, ValueError,
                                  "expects .* batches; got Data")


def test_a_node_net_still_takes_a_mapping_by_keyword_in_predict() -> None:
    # The link refusal sits in the nets' batch adapter (NodeInputs, a PositionalInputs):
    # a mapping given to predict() still reaches forward as keyword inputs, in any order.
    m = NNModel(NNParams(input_dim=F, output_dim=2, hidden_dims=(8,)),
                NNModelParams(net=Nets.GRAPH_CONV, loss=Losses.CROSS_ENTROPY,
                              device=Devices.CPU))
    x = torch.randn(5, F)
    edge_index = torch.tensor([[0, 1, 2], [1, 2, 3]])
    forward = m.predict({"x": x, "edge_index": edge_index}).logits
    assert forward.shape == (5, 2)
    assert torch.equal(m.predict({"edge_index": edge_index, "x": x}).logits, forward)
