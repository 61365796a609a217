"""Graph classification end to end (spec §25): per-graph normalisation, graph ids as
sample ids, node-order invariance, training, resume bit for bit and reload."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import torch
from _graph_families import F, families
from _graph_tiny import StopAfterTwo

from nnx import (
    Checkpoints,
    Devices,
    Losses,
    MonitorSpec,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNRun,
    NNTrainParams,
    ProbabilitySpec,
    TaskSpec,
)
from nnx.components import ComponentRestoreError
from nnx.graph_tasks import (
    IGNORE,
    GraphBatch,
    GraphClassifier,
    GraphClassifierNet,
    GraphCollection,
    GraphPool,
    graph_classifier_spec,
)
from nnx.history import HistoryJournal

CATEGORICAL = ProbabilitySpec(kind="categorical")
TRAIN, VAL = families(60, seed=0, first_id=0), families(20, seed=1, first_id=1000)


def model(encoder: str = "graph_conv", pool: str = "mean", seed: int = 0,
          hidden: tuple[int, ...] = (16, 16)) -> NNModel:
    spec = graph_classifier_spec(input_dim=F, num_classes=2, hidden_dims=hidden,
                                 encoder=encoder, pool=pool, seed=seed)
    return NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY,
                                        device=Devices.CPU), task=GraphClassifier(2))


def params(n_epochs: int, **fields: Any) -> NNTrainParams:
    # A fresh shuffling loader per run: each run's batches come from its own generator.
    return NNTrainParams(n_epochs=n_epochs, train_loader=TRAIN.loader(batch_size=8,
                                                                        shuffle=True, seed=3),
                         val_loader=VAL.loader(batch_size=8), scheduler=None, seed=0,
                         optim=NNOptimParams.builder().adamw(max_lr=2e-2).build(), **fields)


def weights(m: NNModel) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in m.net.state_dict().items()}


def _fixed_nll_model(spec_form: bool = False) -> NNModel:
    """One-node graphs whose logits are [0, x]: with target 0 the NLL is log(1 + e^x),
    so x = log(e^k - 1) gives NLL k exactly."""
    spec = graph_classifier_spec(input_dim=1, num_classes=2, hidden_dims=(1,), pool="sum")
    if spec_form:
        return NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY,
                                            device=Devices.CPU,
                                            task=TaskSpec.categorical(2, ignore_index=IGNORE)))
    m = NNModel(params=NNModelParams(net=spec, loss=Losses.CROSS_ENTROPY, device=Devices.CPU),
                task=GraphClassifier(2))
    with torch.no_grad():
        conv = m.net.encoder.convs[0]
        conv.lin.weight.fill_(1.0)
        conv.bias.zero_()
        m.net.head[1].weight.copy_(torch.tensor([[0.0], [1.0]]))
        m.net.head[1].bias.zero_()
    return m


def _nll_batches() -> list[tuple[GraphBatch, torch.Tensor]]:
    graphs = [(torch.tensor([[math.log(math.e ** k - 1)]]), torch.zeros(2, 0, dtype=torch.long))
              for k in (1, 2, 3)]
    # A fourth, unlabeled graph: it counts in no average.
    graphs.append((torch.tensor([[50.0]]), torch.zeros(2, 0, dtype=torch.long)))
    coll = GraphCollection(graphs, [10, 11, 12, 13], [0, 0, 0, None], unlabeled=[13])
    return [coll.batch([10, 11]), coll.batch([12, 13])]


def test_nlls_1_2_3_in_batches_of_2_then_1_average_to_2_over_labeled_graphs(tmp_path) -> None:
    m = _fixed_nll_model()
    batches = _nll_batches()
    record = m.evaluate(batches)
    assert record.loss == pytest.approx(2.0, abs=1e-5)
    # The batch means are 1.5 and 3: their mean, 2.25, is what a per-batch average gives.
    fit = NNTrainParams(n_epochs=1, train_loader=batches, val_loader=batches,
                        monitor=MonitorSpec("loss", split="train"), scheduler=None,
                        optim=NNOptimParams.builder().sgd(max_lr=0.0).build())
    run = m.train(fit, root=tmp_path, verbose=False)
    last = run.epoch_records()[-1]
    assert last.train_summary.loss == pytest.approx(2.0, abs=1e-5)
    assert last.selection.value == pytest.approx(2.0, abs=1e-5)  # what BEST elects on
    assert last.val_edp.loss == pytest.approx(2.0, abs=1e-5)
    reloaded = NNRun.load(run.id, root=tmp_path)  # the history as written
    assert reloaded.epoch_records()[-1].train_summary.loss == pytest.approx(2.0, abs=1e-5)
    best = NNCheckpoint.load(run.id, Checkpoints.BEST, root=tmp_path)
    assert best.idp.train_summary.loss == pytest.approx(2.0, abs=1e-5)
    # A history journal's per-epoch row (the run chart's series) counts graphs too.
    journaled = m.train(fit, root=tmp_path / "journal", verbose=False,
                        history=HistoryJournal(retention=10))
    rows = (tmp_path / "journal" / journaled.id / "history" / "epochs.jsonl").read_text()
    summary = json.loads(rows.splitlines()[-1])["summary"]
    assert summary["train_summary"]["loss"] == pytest.approx(2.0, abs=1e-5)
    assert summary["selection"]["value"] == pytest.approx(2.0, abs=1e-5)


def test_the_spec_snippet_taskspec_form_scores_the_same(tmp_path) -> None:
    m = _fixed_nll_model(spec_form=True)
    m.net.load_state_dict(_fixed_nll_model().net.state_dict())
    record = m.evaluate(_nll_batches())
    assert record.loss == pytest.approx(2.0, abs=1e-5) and record.count == 3


def test_graph_ids_survive_shuffling_and_concatenation_in_predict_proba() -> None:
    m = model()
    loader = VAL.loader(batch_size=6, shuffle=True, seed=11)
    result = m.predict_proba(loader, CATEGORICAL)
    drawn = loader.sample_ids().tolist()
    assert sorted(drawn) == sorted(VAL.ids) and drawn != list(VAL.ids)
    assert result.sample_ids.tolist() == drawn
    # Each row is the graph it names: score the graphs one by one to compare.
    alone = torch.cat([m.predict([VAL.batch([gid])]).logits for gid in drawn])
    assert torch.allclose(result.logits, alone, atol=1e-6)
    # A list of batches concatenates its graphs' ids.
    parts = [VAL.batch([1003, 1001]), VAL.batch([1019])]
    assert m.predict_proba(parts, CATEGORICAL).sample_ids.tolist() == [1003, 1001, 1019]
    streamed = [r.sample_ids.tolist() for r in m.iter_predict(parts)]
    assert streamed == [[1003, 1001], [1019]]


@pytest.mark.parametrize("encoder", ["graph_conv", "graph_sage", "graph_att"])
@pytest.mark.parametrize("pool", ["mean", "sum"])
def test_pooling_is_invariant_to_node_order_within_each_graph(encoder: str, pool: str) -> None:
    net = model(encoder, pool).net.eval()
    coll = families(5, seed=2)
    g = torch.Generator().manual_seed(0)
    permuted = []
    for gid in coll.ids:
        x, edges = coll.graph(gid)
        perm = torch.randperm(x.shape[0], generator=g)
        new_of_old = torch.empty_like(perm)
        new_of_old[perm] = torch.arange(perm.numel())
        permuted.append((x[perm], new_of_old[edges]))
    shuffled = GraphCollection(permuted, coll.ids, coll.targets.tolist())
    with torch.no_grad():
        a = net(coll.batch(coll.ids)[0])
        b = net(shuffled.batch(coll.ids)[0])
    assert torch.allclose(a, b, atol=1e-6)


def test_graph_pool_is_graph_local() -> None:
    h = torch.tensor([[1.0], [3.0], [10.0]])
    batch = torch.tensor([0, 0, 1])
    assert GraphPool("mean")(h, batch, 2).tolist() == [[2.0], [10.0]]
    assert GraphPool("sum")(h, batch, 2).tolist() == [[4.0], [10.0]]
    with pytest.raises(ValueError, match="mode must be one of"):
        GraphPool("max")


def test_a_graph_classifier_learns_cycles_from_stars_resumes_bit_for_bit_and_reloads(
        tmp_path) -> None:
    straight = model()
    full = straight.train(params(4), root=tmp_path / "a", verbose=False)
    first = model()
    run = first.train(params(4), callbacks=[StopAfterTwo()], root=tmp_path / "b",
                      verbose=False)
    resumed = model(seed=5)  # other weights: the checkpoint must replace them
    again = resumed.train(params(4, resume_from_run_id=run.id, resume_mode="stateful",
                                 resume_epochs="planned"), root=tmp_path / "b", verbose=False)
    joined = [i.state() for i in NNRun.load(run.id, root=tmp_path / "b").idps] + [
        i.state() for i in NNRun.load(again.id, root=tmp_path / "b").idps]
    assert joined == [i.state() for i in NNRun.load(full.id, root=tmp_path / "a").idps]
    end, other = weights(straight), weights(resumed)
    assert end.keys() == other.keys() and all(torch.equal(end[k], other[k]) for k in end)
    assert NNRun.load(full.id, root=tmp_path / "a").state()["task"] == {
        "kind": "graph.classifier", "num_classes": 2}
    # Reload rebuilds the same encoder, pool and head through the recipe.
    last = NNCheckpoint.load(full.id, Checkpoints.LAST, root=tmp_path / "a")
    reloaded = NNModel.from_checkpoint(last, task=GraphClassifier(2))
    assert isinstance(reloaded.net, GraphClassifierNet)
    assert reloaded.net.config == straight.net.config
    val = VAL.loader(batch_size=8)
    assert torch.equal(reloaded.predict(val).logits, straight.predict(val).logits)


def test_it_trains_to_good_accuracy(tmp_path) -> None:
    m = model()  # rings vs dense graphs
    m.train(params(10), root=tmp_path, verbose=False)
    assert m.evaluate(VAL.loader(batch_size=8)).accuracy > 0.9


def test_a_resume_with_another_class_count_is_refused(tmp_path) -> None:
    run = model().train(params(1), root=tmp_path, verbose=False)
    other = NNModel(params=model(seed=5).params, task=GraphClassifier(3))
    before = weights(other)
    disk = {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()}
    with pytest.raises(ComponentRestoreError, match=r"graph\.classifier.*num_classes=3"):
        other.train(params(2, resume_from_run_id=run.id, resume_mode="stateful"),
                    root=tmp_path, verbose=False)
    # Refused before the first resumed update: the weights and the runs are untouched.
    after = weights(other)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert {p: p.read_bytes() for p in sorted(tmp_path.rglob("*")) if p.is_file()} == disk
