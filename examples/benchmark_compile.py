"""Opt-in compilation and benchmarks (spec §28), offline, in seconds.

* ``model.train(params, compile=CompileSpec(...))`` runs the default step's forward
  and the fit's validation through ``torch.compile``; ``model.net`` stays the eager
  module, so checkpoints keep its keys and load into an eager model.
* ``on_failure="eager"`` finishes a run whose forward cannot compile (here a graph
  break under ``fullgraph=True``) eager, and the CompileRecord says where it restarted.
* ``nnx.benchmarking`` times the forward (first call apart from warmed calls),
  compares eager and compiled copies of the same weights, and profiles on a finite
  schedule into an explicit directory.

The "aot_eager" backend keeps this fast; pass ``CompileSpec()`` for inductor, which
compiles kernels on the first call. No speed-up is promised: measure it.

    uv run python examples/benchmark_compile.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import (
    Devices,
    Losses,
    Nets,
    NNCheckpoint,
    NNConvParams,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
)
from nnx.benchmarking import benchmark_forward, compare_compile, profile_forward
from nnx.compilation import CompileSpec

torch.manual_seed(0)
x = torch.randn(256, 1, 8, 8)
y = (x.mean(dim=(1, 2, 3)) > 0).long()
train = DataLoader(TensorDataset(x[:192], y[:192]), batch_size=32)
val = DataLoader(TensorDataset(x[192:], y[192:]), batch_size=64)


def conv_model() -> NNModel:
    torch.manual_seed(0)
    return NNModel(NNConvParams(input_dim=64, output_dim=2, conv_channels=(8,),
                                hidden_dims=(16,)),
                   NNModelParams(net=Nets.CONV, device=Devices.CPU, loss=Losses.CROSS_ENTROPY))


def params() -> NNTrainParams:
    return NNTrainParams(n_epochs=2, train_loader=train, val_loader=val, scheduler=None,
                         seed=0, optim=NNOptimParams.builder().adam(max_lr=1e-2).build())


with tempfile.TemporaryDirectory() as tmp:
    root = Path(tmp) / "runs"

    # 1. A compiled fit: the record says what took effect; the net stays canonical.
    model = conv_model()
    run = model.train(params(), compile=CompileSpec(backend="aot_eager"), root=root,
                      verbose=False)
    record = run.compile
    print(f"compiled fit: effect={record.effect}, capture={record.capture}, "
          f"graph breaks={record.graph_breaks}, val loss {run.idps[-1].val_edp.loss:.4f}")
    eager_twin = conv_model()
    eager_twin.net.load_state_dict(NNCheckpoint.load(run.id, root=root).state_dict,
                                   strict=True)
    print(f"its LAST loads into an eager ConvNN under strict=True: "
          f"{type(model.net).__name__}, same predictions "
          f"{torch.equal(eager_twin.predict(x[:8]).classes, model.predict(x[:8]).classes)}")

    # 2. A forward that cannot compile under fullgraph=True finishes eager.
    breaking = conv_model()
    breaking.net.register_forward_pre_hook(lambda mod, args: torch._dynamo.graph_break())
    fell_back = breaking.train(
        params(), root=Path(tmp) / "other", verbose=False,
        compile=CompileSpec(backend="eager", fullgraph=True, on_failure="eager"))
    restart = fell_back.compile.restart
    print(f"fullgraph with a graph break: effect={fell_back.compile.effect}, restarted at "
          f"{restart.phase} epoch {restart.epoch} batch {restart.batch}; "
          f"{len(fell_back.idps)} records")

    # 3. Measure instead of assuming.
    sample = x[:64]
    bench = benchmark_forward(model, sample, warmup=3, repeats=10)
    print(f"benchmark_forward: {bench.backend} on {bench.device}, input "
          f"{bench.input_shapes[0]} {bench.input_dtypes[0]}, {bench.repeats} timed calls")
    both = compare_compile(model, sample, compile=CompileSpec(backend="aot_eager"),
                           warmup=2, repeats=5)
    print(f"compare_compile: identical weights {both.same_weights}, "
          f"max |eager - compiled| = {both.max_abs_diff:.1e}")
    report = profile_forward(model, sample, output_dir=Path(tmp) / "profile", wait=1,
                             warmup=1, active=2)
    print(f"profile_forward: {report.steps} steps, {len(report.traces)} trace file(s) "
          f"under the output directory")
