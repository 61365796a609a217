"""compile= covers a TransformerNN trained by the default step; generation stays eager
(spec §28; issue 36 item 13). The "eager" backend keeps it fast: dynamo still captures
the forward (the record says "compiled", capture "full"), without inductor's codegen."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch._dynamo.utils import counters

from nnx import Devices, Losses, Nets, NNModelParams, NNOptimParams, NNTrainParams
from nnx.compilation import CompileSpec
from nnx.lm import GenerativeNNModel, NNTransformerParams, TransformerNN

VOCAB = 32
SHAPE = NNTransformerParams(vocab_size=VOCAB, d_model=16, n_heads=2, n_layers=1, max_seq_len=32)


def model() -> GenerativeNNModel:
    torch.manual_seed(0)
    # MSE against one-hot next tokens: the default step's losses read class axis 1, so
    # an elementwise loss is how the default step trains a (batch, T, vocab) output.
    return GenerativeNNModel(net_params=SHAPE, params=NNModelParams(
        net=Nets.TRANSFORMER, device=Devices.CPU, loss=Losses.MEAN_SQUARED_ERROR))


def params() -> NNTrainParams:
    ids = torch.randint(0, VOCAB, (8, 9), generator=torch.Generator().manual_seed(1))
    hot = F.one_hot(ids[:, 1:], VOCAB).float()
    batches = [(ids[:4, :-1], hot[:4]), (ids[4:, :-1], hot[4:])]
    return NNTrainParams(n_epochs=2, train_loader=batches, val_loader=batches[:1],
                         optim=NNOptimParams.builder().adamw(max_lr=1e-2).build(),
                         scheduler=None, seed=0)


def test_a_default_step_transformer_fit_compiles_and_trains_as_the_eager_one(
        tmp_path: Path) -> None:
    eager = model()
    eager_run = eager.train(params(), verbose=False, root=tmp_path / "eager")
    compiled = model()
    net = compiled.net
    run = compiled.train(params(), compile=CompileSpec(backend="eager"), verbose=False,
                         root=tmp_path / "compiled")
    assert run.compile is not None
    assert (run.compile.effect, run.compile.capture) == ("compiled", "full")
    assert compiled.net is net and isinstance(net, TransformerNN)  # never the wrapper
    for key, value in eager.net.state_dict().items():
        assert torch.allclose(value, compiled.net.state_dict()[key], atol=1e-6), key
    assert [r.train_edp.loss for r in run.epoch_records()] == pytest.approx(
        [r.train_edp.loss for r in eager_run.epoch_records()], rel=1e-5)


def test_generation_after_a_compiled_fit_is_eager(tmp_path: Path) -> None:
    compiled = model()
    compiled.train(params(), compile=CompileSpec(backend="eager"), verbose=False,
                   root=tmp_path)
    assert compiled._fit_forward is None  # the wrapper is dropped when the fit ends
    frames = dict(counters["frames"])
    out = compiled.generate([1, 2, 3], max_new_tokens=4, temperature=0)
    assert dict(counters["frames"]) == frames  # dynamo saw no frame of the generation
    assert out == compiled.generate([1, 2, 3], max_new_tokens=4, temperature=0,
                                    use_cache=False)

