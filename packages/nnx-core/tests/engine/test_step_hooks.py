"""The step and evaluation hooks (spec §6.1, §6.2): eval_step_fn once per epoch in eval
mode, the step context's knobs and set_epoch, and the spec's import line."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from _nnx_core_tiny import sgd
from _support.training_loop import _loader, make_model

from nnx import (
    Callback,
    MetricSpec,
    NNEvaluationDataPoint,
    NNOptimParams,
    NNRun,
    NNTrainParams,
    default_train_step,
)

# -- the step and evaluation hooks ---------------------------------------------------------


def test_eval_step_fn_runs_once_per_epoch_in_eval_mode_without_grad(tmp_path):
    calls = []
    val = _loader()

    def evaluate(ctx):
        calls.append({"grad": torch.is_grad_enabled(), "training": ctx.model.net.training,
                      "epoch": ctx.epoch_idx, "loader": ctx.val_loader is val,
                      "metrics": tuple(m.label for m in ctx.metrics)})
        return NNEvaluationDataPoint(loss=0.5, extra={"custom": 1.5})

    class Modes(Callback):
        def on_epoch_end(self, ctx):
            calls.append({"after": ctx.model.net.training})

    run = make_model().train(
        NNTrainParams(n_epochs=2, train_loader=_loader(), val_loader=val, optim=sgd(),
                      metrics=[MetricSpec("nll")], scheduler=None),
        eval_step_fn=evaluate, callbacks=[Modes()], root=tmp_path / "runs", verbose=False)
    expected = {"grad": False, "training": False, "loader": True, "metrics": ("nll",)}
    assert calls == [{**expected, "epoch": 0}, {"after": True},
                     {**expected, "epoch": 1}, {"after": True}]
    assert [r.val_edp.extra for r in run.epoch_records()] == [{"custom": 1.5}] * 2
    assert NNRun.load(run.id, root=tmp_path / "runs").epoch_records()[1].val_edp.extra == {
        "custom": 1.5}


def test_the_step_context_carries_the_knobs_and_set_epoch_is_called(tmp_path):
    seen = []

    class EpochLoader(list):
        def set_epoch(self, epoch):
            seen.append(("set_epoch", epoch))

    def step(ctx):
        seen.append((ctx.epoch, ctx.batch_idx, ctx.accumulate_grad_batches, ctx.grad_clip_norm,
                     ctx.scaler, ctx.window.closes))
        with pytest.raises(ValueError, match="without a name"):
            ctx.report_update("generator")
        return default_train_step(ctx)

    optim = NNOptimParams.builder().sgd(max_lr=0.1).grad_clip(0.5).accumulate_grad(2).build()
    run = make_model().train(NNTrainParams(n_epochs=2, train_loader=EpochLoader(_loader()),
                                           optim=optim, scheduler=None),
                             train_step_fn=step, root=tmp_path / "runs", verbose=False)
    assert seen == [("set_epoch", 0), (0, 0, 2, 0.5, None, False), (0, 1, 2, 0.5, None, True),
                    ("set_epoch", 1), (1, 0, 2, 0.5, None, False), (1, 1, 2, 0.5, None, True)]
    assert [i.update_count for i in run.idps] == [0, 1, 1, 2]


def test_the_spec_import_line_works_in_a_fresh_interpreter():
    # §6.4's own example import; nnx.params and nnx.metrics / nnx.monitors import each
    # other's modules, which must not be a circular import whichever is loaded first.
    script = """
import importlib, sys, torch
for line in ("from nnx import EarlyStopping, MetricSpec, MonitorSpec, NNTrainParams",
             "import nnx.monitors", "import nnx.metrics", "import nnx.params"):
    for name in [m for m in sys.modules if m == "nnx" or m.startswith("nnx.")]:
        del sys.modules[name]
    importlib.invalidate_caches()
    exec(line)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
