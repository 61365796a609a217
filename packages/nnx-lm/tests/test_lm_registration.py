"""nnx-lm through nnx-core's entry points: top-level names, Nets.TRANSFORMER, runs (§15)."""

from __future__ import annotations

import math
from pathlib import Path

import torch
import torch.nn.functional as F

import nnx
from nnx import (
    Nets,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNRun,
    NNTrainParams,
)
from nnx.extend import finalize_step
from nnx.lm import TRANSFORMER, NNTransformerParams, NNTransformerParamsBuilder, RMSNorm, RoPE
from nnx.lm.net import TransformerNN

SHAPE = NNTransformerParams(vocab_size=37, d_model=16, n_heads=2, n_layers=1, max_seq_len=16)


def test_top_level_names_resolve_through_the_entry_points() -> None:
    from nnx import TransformerNN as exported

    assert exported is TransformerNN
    assert nnx.NNTransformerParams is NNTransformerParams
    assert nnx.NNTransformerParamsBuilder is NNTransformerParamsBuilder
    assert (nnx.RMSNorm, nnx.RoPE) == (RMSNorm, RoPE)


def test_nets_transformer_is_the_registration() -> None:
    assert Nets.TRANSFORMER is Nets["TRANSFORMER"]
    assert Nets.TRANSFORMER.registration is TRANSFORMER
    assert Nets.TRANSFORMER.params_class is NNTransformerParams
    assert isinstance(Nets.TRANSFORMER(SHAPE), TransformerNN)


def _model(seed: int = 0) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(params=NNModelParams(net=Nets.TRANSFORMER), net_params=SHAPE)


def test_nnmodel_builds_the_transformer() -> None:
    model = _model()
    assert isinstance(model.net, TransformerNN)
    assert model.net.params == SHAPE


def _batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 37, (6, 9), generator=g)
    return [(ids[i:i + 2, :-1], ids[i:i + 2, 1:]) for i in range(0, 6, 2)]


def _next_token_step(ctx):  # type: ignore[no-untyped-def]
    # The causal-LM task comes later: next-token cross-entropy by hand.
    (ids,), targets = ctx.model.split_batch(ctx.batch)
    logits = ctx.model.net(ids)
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten())
    return finalize_step(ctx, loss).record()


def _train_params() -> NNTrainParams:
    optim = NNOptimParams.builder().adamw(max_lr=1e-2).build()
    return NNTrainParams(n_epochs=1, train_loader=_batches(), optim=optim, scheduler=None)


def test_an_lm_run_trains_and_reloads_its_transformer_params(tmp_path: Path) -> None:
    model = _model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    run = model.train(_train_params(), train_step_fn=_next_token_step, root=tmp_path,
                      verbose=False)
    after = model.net.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    loss = run.epoch_records()[0].train_edp.loss
    assert loss is not None and math.isfinite(loss)

    assert run.id == nnx.run_id(model=model.params, net=SHAPE, train=_train_params())
    loaded = NNRun.load(run.id, root=tmp_path)
    assert type(loaded.net_params) is NNTransformerParams
    assert loaded.net_params == SHAPE
    assert loaded.model_params.net is Nets.TRANSFORMER
    resolved = NNParams.resolve_from_state(SHAPE.state(), "TRANSFORMER")
    assert type(resolved) is NNTransformerParams and resolved == SHAPE
    assert NNParams.resolve_from_state(SHAPE.state(), Nets.TRANSFORMER) == SHAPE


def test_the_run_id_of_an_lm_configuration_is_pinned() -> None:
    # Pinned: a field added to NNTransformerParams (omitted at its default) must not move it.
    rid = nnx.run_id(model=NNModelParams(net=Nets.TRANSFORMER), net=SHAPE, train=_train_params())
    assert SHAPE.state() == {"n_heads": 2, "vocab_size": 37, "n_layers": 1, "d_model": 16,
                             "max_seq_len": 16}
    assert rid == "50f102bd8ed48d8d4e1f165c9d7656c1"
