"""link_predictor_spec (spec §26): a registered recipe rebuilt on reload; GCN / SAGE / GAT
encoders without a final activation; symmetric dot and MLP decoders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import yaml
from _link_tiny import F, a_split, plan

from nnx import (
    Devices,
    Losses,
    ModelSpec,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    PositionalInputs,
)
from nnx.link_tasks import LinkPredictor, LinkTask, link_predictor_spec

ENCODERS = ("graph_conv", "graph_sage", "graph_att")


def graph(seed: int = 0, nodes: int = 12, candidates: int = 16
          ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Node features, a message graph, candidate pairs and 0 / 1 targets."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(nodes, 5, generator=g)
    edge_index = torch.randint(0, nodes, (2, 40), generator=g)
    pairs = torch.randint(0, nodes, (2, candidates), generator=g)
    return x, edge_index, pairs, torch.randint(0, 2, (candidates,), generator=g).float()


def built(spec: ModelSpec) -> torch.nn.Module:
    """The module core builds from the spec (seeded from spec.seed), in eval mode."""
    return NNModel(params=NNModelParams(net=spec, device=Devices.CPU)).net.eval()


RELOAD = """
import json, sys, torch
from nnx import NNCheckpoint, NNModel, PositionalInputs
root, run_id, inputs = sys.argv[1:]
x, edge_index, pairs = torch.load(inputs)
net = NNModel.from_checkpoint(NNCheckpoint.load(run_id, root=root),
                              batch_adapter=PositionalInputs(3)).net.eval()
print(type(net).__module__, json.dumps(net(x, edge_index, pairs).tolist()))
"""


def test_the_recipe_round_trips_through_the_run_config_and_reload_gives_the_same_logits(
        tmp_path: Path) -> None:
    spec = link_predictor_spec(input_dim=5, hidden_dims=[8, 4], encoder="graph_sage",
                               decoder="mlp", seed=3)
    model = NNModel(params=NNModelParams(net=spec, loss=Losses.BINARY_CROSS_ENTROPY,
                                         device=Devices.CPU),
                    batch_adapter=PositionalInputs(3))  # (x, edge_index, pairs, targets)
    batches = [graph(0), graph(1)]
    run = model.train(NNTrainParams(n_epochs=2, train_loader=batches, val_loader=batches,
                                    seed=0, optim=NNOptimParams.builder().adam(max_lr=1e-2)
                                    .build()), verbose=False, root=tmp_path)
    recorded = yaml.safe_load((run.path / "run.yaml").read_text())["model"]["net"]
    assert recorded == spec.state() and ModelSpec.from_state(recorded) == spec
    x, edge_index, pairs, _ = graph(5)
    want = model.net.eval()(x, edge_index, pairs)
    reloaded = NNModel.from_checkpoint(NNCheckpoint.load(run.id, root=tmp_path),
                                       batch_adapter=PositionalInputs(3))
    assert isinstance(reloaded.net, LinkPredictor)
    assert torch.equal(reloaded.net.eval()(x, edge_index, pairs), want)
    # A fresh process that never imports nnx.link_tasks rebuilds it from the entry point.
    torch.save((x, edge_index, pairs), tmp_path / "inputs.pt")
    out = subprocess.run([sys.executable, "-c", RELOAD, str(tmp_path), run.id,
                          str(tmp_path / "inputs.pt")], capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0, out.stderr
    module, _, logits = out.stdout.strip().partition(" ")
    assert module == "nnx.link_tasks.predictor"
    assert torch.equal(torch.tensor(json.loads(logits)), want.detach())


@pytest.mark.parametrize("encoder", ENCODERS)
@pytest.mark.parametrize("decoder", ["dot", "mlp"])
@pytest.mark.parametrize("categories", [None, 3])
def test_both_decoders_score_u_to_v_and_v_to_u_alike(encoder: str, decoder: str,
                                                     categories: int | None) -> None:
    net = built(link_predictor_spec(input_dim=5, hidden_dims=[6, 4], encoder=encoder,
                                    decoder=decoder, categories=categories, n_heads=2))
    x, edge_index, pairs, _ = graph(1)
    logits = net(x, edge_index, pairs)
    assert logits.shape == ((16,) if categories is None else (16, 3))
    assert torch.equal(net(x, edge_index, pairs.flip(0)), logits)


@pytest.mark.parametrize("encoder", ENCODERS)
def test_dot_logits_can_be_negative_no_activation_after_the_last_encoder_layer(
        encoder: str) -> None:
    # One layer: a ReLU'd hidden layer confines embeddings to a cone, where dot products
    # are mostly positive; a single linear message-passing layer shows the sign freely.
    net = built(link_predictor_spec(input_dim=5, hidden_dims=[4], encoder=encoder))
    x, edge_index, _, _ = graph(2)
    pairs = torch.cartesian_prod(torch.arange(12), torch.arange(12)).t()  # every pair
    embeddings = net.encoder(x, edge_index)
    assert bool((embeddings < 0).any())  # a final ReLU would make every entry >= 0
    logits = net(x, edge_index, pairs)
    assert bool((logits < 0).any()) and bool((logits > 0).any())
    assert torch.allclose(logits, (embeddings[pairs[0]] * embeddings[pairs[1]]).sum(-1))


def test_the_spec_records_every_value_and_the_same_spec_builds_the_same_weights() -> None:
    spec = link_predictor_spec(input_dim=5, hidden_dims=(6, 4), categories=["a", "b", "c"],
                               activation="GELU", seed=7)
    assert spec.label == "link.predictor@v1" and spec.seed == 7
    assert dict(spec.config) == {
        "input_dim": 5, "hidden_dims": (6, 4), "encoder": "graph_conv", "decoder": "dot",
        "categories": 3, "activation": "gelu", "dropout": 0.0, "n_heads": 1,
        "decoder_hidden": None}
    a, b = built(spec).state_dict(), built(spec).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"encoder": "gin"}, r"encoder must be one of 'graph_conv', 'graph_sage', 'graph_att'"),
    ({"decoder": "bilinear"}, r"decoder must be one of 'dot', 'mlp'"),
    ({"hidden_dims": []}, "at least one layer width"),
    ({"hidden_dims": [4, 0]}, r"hidden_dims\[1\]|output_dim"),
    ({"categories": 1}, r"categories must be an integer >= 2"),
    ({"categories": "abc"}, "sequence of category names"),
    ({"input_dim": None}, "input_dim must be an integer"),
    ({"dropout": 1.5}, "dropout_prob"),
    ({"decoder_hidden": 0}, "decoder_hidden"),
])
def test_a_bad_recipe_is_refused_before_anything_is_built(kwargs: dict[str, Any],
                                                          match: str) -> None:
    with pytest.raises(ValueError, match=match):
        link_predictor_spec(**{"input_dim": 5, "hidden_dims": [4], **kwargs})


def test_the_factory_refuses_a_config_with_unknown_or_missing_keys() -> None:
    with pytest.raises(ValueError, match=r"unknown keys \['width'\]"):
        built(ModelSpec("link.predictor", 1, {"input_dim": 5, "hidden_dims": [4],
                                              "width": 3}))
    with pytest.raises(ValueError, match=r"missing keys \['hidden_dims'\]"):
        built(ModelSpec("link.predictor", 1, {"input_dim": 5}))


def test_candidate_pairs_must_be_two_rows() -> None:
    net = built(link_predictor_spec(input_dim=5, hidden_dims=[4]))
    x, edge_index, pairs, _ = graph(3)
    with pytest.raises(ValueError, match=r"edge_label_index must be \(2, K\)"):
        net(x, edge_index, pairs.t())


def test_the_recipe_trained_under_a_link_task_is_rebuilt_on_reload(tmp_path: Path) -> None:
    # Spec §26 "Recipe": run.yaml records the spec; from_checkpoint rebuilds the module and
    # the task's predict scores the test candidates exactly as the trained model did.
    split, _, x = a_split()
    task = LinkTask(split)
    spec = link_predictor_spec(input_dim=F, hidden_dims=[8, 4], encoder="graph_att",
                               decoder="mlp", n_heads=2, seed=1)
    model = NNModel(params=NNModelParams(net=spec, device=Devices.CPU), task=task)
    run = model.train(plan(task, x, n_epochs=2), root=tmp_path, verbose=False)
    want = task.predict(model, task.loader("test", x, 16))
    reloaded = NNModel.from_checkpoint(NNCheckpoint.load(run.id, root=tmp_path), task=task)
    assert isinstance(reloaded.net, LinkPredictor)
    got = task.predict(reloaded, task.loader("test", x, 16))
    assert torch.equal(got.logits, want.logits) and torch.equal(got.ids, want.ids)
