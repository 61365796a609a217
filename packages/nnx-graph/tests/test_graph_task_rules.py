"""Spec §25 rules the end-to-end tests leave implicit: the TaskSpec form (no
GraphClassifier object) refuses malformed batches through the net's own check, and a
reload rebuilds every encoder and pool the recipe offers."""

from __future__ import annotations

import pytest
import torch
from _graph_families import F, families

from nnx import (
    Checkpoints,
    Devices,
    Losses,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    TaskSpec,
)
from nnx.graph_tasks import (
    IGNORE,
    CrossGraphEdgeError,
    EmptyGraphError,
    GraphClassifier,
    GraphClassifierNet,
    GraphCollection,
    GraphIdError,
    graph_classifier_spec,
)

COLL = families(6)


def weights(m: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in m.net.state_dict().items()}


def test_the_taskspec_form_refuses_malformed_batches_before_the_forward() -> None:
    spec = graph_classifier_spec(input_dim=F, num_classes=2, hidden_dims=(8,))
    m = NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY, device=Devices.CPU,
                                     task=TaskSpec.categorical(2, ignore_index=IGNORE)))
    before = weights(m)
    inputs, y = COLL.batch([100, 101])
    rows = int(inputs.ptr[1])
    bad = {
        CrossGraphEdgeError: type(inputs)(inputs.x, torch.tensor([[0], [rows]]),
                                          inputs.batch, inputs.ptr, inputs.graph_id),
        GraphIdError: type(inputs)(inputs.x, inputs.edge_index, inputs.batch, inputs.ptr,
                                   torch.tensor([7, 7])),
        EmptyGraphError: type(inputs)(inputs.x[:rows], inputs.edge_index[:, :0],
                                      inputs.batch[:rows], torch.tensor([0, rows, rows]),
                                      inputs.graph_id),
    }
    for error, batch in bad.items():
        with pytest.raises(error):
            m.predict([(batch, y)])
        with pytest.raises(error):
            m.evaluate([(batch, y)])
    assert all(torch.equal(v, before[k]) for k, v in weights(m).items())


@pytest.mark.parametrize(("encoder", "pool"), [("graph_sage", "sum"), ("graph_att", "mean")])
def test_a_reload_rebuilds_the_same_encoder_pool_and_head(tmp_path, encoder: str,
                                                           pool: str) -> None:
    spec = graph_classifier_spec(input_dim=F, num_classes=2, hidden_dims=(8,),
                                 encoder=encoder, pool=pool)
    m = NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY, device=Devices.CPU),
                task=GraphClassifier(2))
    run = m.train(NNTrainParams(n_epochs=1, train_loader=COLL.loader(batch_size=3),
                                scheduler=None, seed=0,
                                optim=NNOptimParams.builder().adamw(max_lr=1e-2).build()),
                  root=tmp_path, verbose=False)
    last = NNCheckpoint.load(run.id, Checkpoints.LAST, root=tmp_path)
    reloaded = NNModel.from_checkpoint(last, task=GraphClassifier(2))
    assert isinstance(reloaded.net, GraphClassifierNet)
    assert reloaded.net.config == m.net.config
    assert (reloaded.net.config["encoder"], reloaded.net.config["pool"]) == (encoder, pool)
    assert repr(reloaded.net) == repr(m.net)  # the same modules, layer by layer
    loader = COLL.loader(batch_size=4)
    assert torch.equal(reloaded.predict(loader).logits, m.predict(loader).logits)


def test_accuracy_is_averaged_over_labeled_graphs_never_batches() -> None:
    # One-node graphs whose logits are [0, x] with x > 0: each is predicted class 1.
    spec = graph_classifier_spec(input_dim=1, num_classes=2, hidden_dims=(1,), pool="sum")
    m = NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY, device=Devices.CPU),
                task=GraphClassifier(2))
    with torch.no_grad():
        m.net.encoder.convs[0].lin.weight.fill_(1.0)
        m.net.encoder.convs[0].bias.zero_()
        m.net.head[1].weight.copy_(torch.tensor([[0.0], [1.0]]))
        m.net.head[1].bias.zero_()
    graphs = [(torch.tensor([[v]]), torch.zeros(2, 0, dtype=torch.long)) for v in (1., 2., 3., 4.)]
    coll = GraphCollection(graphs, [10, 11, 12, 13], [1, 1, 0, None], unlabeled=[13])
    # Batch means 1 and 0 (graph 13 unlabeled) would give 1/2; counting graph 13 as a
    # miss would give 2/4. Per labeled graph: 2 of 3.
    record = m.evaluate([coll.batch([10, 11]), coll.batch([12, 13])])
    assert record.accuracy == pytest.approx(2 / 3, abs=1e-6)
