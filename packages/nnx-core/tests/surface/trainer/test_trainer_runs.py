"""The Trainer's runs (spec §8.3, §5, §6.4): run.yaml's trainer block, callbacks seeing
every optimizer, a declared monitor deciding BEST, epoch_idx, and the examples."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from _support.trainer import (
    TWO,
    GanStep,
    Probe,
    _plan,
    gan_builder,
    gan_model,
    )

from nnx import (
    Callback,
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNRun,
    NNTrainerParams,
    Trainer,
    TrainerStepContext,
    supervised_objective,
)

EXAMPLES = Path(__file__).resolve().parents[5] / "examples"


# == 4. §8.3 NNRun integration and the callback context ========================================
def test_run_yaml_has_a_trainer_block_and_callbacks_see_every_optimizer(tmp_path):
    model = gan_model()
    trainer = Trainer(model)
    probe = Probe()
    params = gan_builder(2).build()
    run = trainer.train(params, trainer_step_fn=GanStep(), callbacks=[probe], verbose=False,
                        root=tmp_path)

    doc = yaml.safe_load((run.path / "run.yaml").read_text(encoding="utf-8"))
    assert "trainer" in doc and "train" not in doc
    assert doc["trainer"] == params.state()
    assert sorted(doc["trainer"]["optims"]) == ["D", "G"]
    assert doc["trainer"]["optims"]["G"]["param_groups"] == [{"name_pattern": "G.*"}]
    assert doc["trainer"]["seed"] == 0 and doc["trainer"]["n_epochs"] == 2
    loaded = NNRun.load(run.id, root=tmp_path)
    assert loaded.id == run.id and loaded.train_params is None
    assert loaded.trainer_params.state() == run.trainer_params.state() == params.state()
    assert [r.epoch for r in loaded.epoch_records()] == [0, 1]

    assert [(hook, epoch) for hook, epoch, *_ in probe.seen] == [
        ("train_begin", 0), ("epoch_end", 0), ("epoch_end", 1), ("train_end", 1)]
    opts = probe.optimizers
    assert list(opts) == ["G", "D"] and opts["G"] is not opts["D"]
    for _, _, primary, optimizers, seen_trainer in probe.seen:
        assert optimizers == opts
        assert primary is opts["D"]  # the sorted-first name, not the first inserted
        assert seen_trainer is trainer
    names = {id(p): n for n, p in model.net.named_parameters()}
    assert [names[id(p)] for g in opts["G"].param_groups for p in g["params"]] == [
        "G.0.weight", "G.0.bias", "G.2.weight", "G.2.bias"]
    assert [names[id(p)] for g in opts["D"].param_groups for p in g["params"]] == [
        "D.0.weight", "D.0.bias", "D.2.weight", "D.2.bias"]


# == the runnable examples =====================================================================
@pytest.mark.parametrize(("script", "shows"), [
    ("09_gan_with_trainer.py", ["         G: ADAM max_lr=0.01 weight_decay=0\n",
                                "         D: ADAM max_lr=0.01 weight_decay=0\n",
                                "4000 generated samples: "]),
    ("optimizer_factories.py", ["   encoder: example.lion@v1 max_lr=0.001 weight_decay=0.1\n",
                                "      head: ADAMW max_lr=0.01 weight_decay=0.01\n"]),
])
def test_the_example_runs(tmp_path, script, shows):
    out = subprocess.run([sys.executable, str(EXAMPLES / script)], cwd=tmp_path,
                         capture_output=True, text=True, check=False, timeout=300)
    assert out.returncode == 0, out.stderr
    assert all(line in out.stdout for line in shows), out.stdout
    assert list(tmp_path.iterdir()) == []  # everything went to a temporary directory


# == §6.4: declared metrics and a named monitor through the builder ==========================
def test_a_builder_declared_metric_and_monitor_decide_the_trainers_best(tmp_path):
    from nnx import Checkpoints, MetricSpec, MonitorSpec

    # The validation loss falls every epoch (the legacy rule would pick epoch 3); the
    # declared accuracy peaks at epoch 1, and the monitor follows the accuracy.
    losses, accuracies = [4.0, 3.0, 2.0, 1.0], [0.5, 0.6, 0.55, 0.58]

    def scripted(ctx):
        return NNEvaluationDataPoint(loss=losses[ctx.epoch_idx],
                                     metrics={"acc": accuracies[ctx.epoch_idx]})

    best_epochs: list[int] = []

    class BestProbe(Callback):
        def on_epoch_end(self, ctx):  # read BEST once the epoch has committed
            ctx.defer(lambda c: best_epochs.append(NNCheckpoint.load(
                c.run.id, Checkpoints.BEST, root=c.run.root).epoch))

    params = (NNTrainerParams.builder().n_epochs(4).train_loader(tiny_batches(2))
              .val_loader(tiny_batches(1, seed=1)).optimizer("net", sgd())
              .metrics([MetricSpec("accuracy", name="acc")])
              .monitor(MonitorSpec(metric="acc", min_delta=0.01))
              .build())
    run = Trainer(tiny_model()).train(params, objective=supervised_objective(),
                                      eval_step_fn=scripted, callbacks=[BestProbe()],
                                      verbose=False, root=tmp_path)
    records = run.epoch_records()
    assert [r.selection["improved"] for r in records] == [True, True, False, False]
    assert [r.selection["direction"] for r in records] == ["max"] * 4
    assert best_epochs == [0, 1, 1, 1]  # BEST written exactly on the improving epochs
    best = run.best_checkpoint()
    assert best is not None and best.epoch == 1 and best.monitor_value == pytest.approx(0.6)
    state = yaml.safe_load((run.path / "run.yaml").read_text())["trainer"]
    assert state["metrics"] == [{"id": "accuracy", "version": 1, "name": "acc"}]
    assert state["monitor"]["metric"] == "acc"


def test_a_trainer_step_context_answers_epoch_idx_beside_epoch(tmp_path):
    seen: list[tuple[int, int]] = []

    def step(ctx: TrainerStepContext) -> NNEvaluationDataPoint:
        seen.append((ctx.epoch, ctx.epoch_idx))
        return NNEvaluationDataPoint(loss=1.0, error=1.0)

    Trainer(tiny_model()).train(_plan(*TWO, n_epochs=2), trainer_step_fn=step, verbose=False,
                                root=tmp_path)
    assert seen == [(0, 0), (0, 0), (1, 1), (1, 1)]


def test_a_trainer_run_lists_through_its_summary_as_through_its_checkpoints(tmp_path, capsys):
    from nnx.cli import main

    run = Trainer(gan_model()).train(gan_builder(2).build(), trainer_step_fn=GanStep(),
                                     verbose=False, root=tmp_path)
    assert (run.path / "summary.json").is_file()
    capsys.readouterr()
    main(["runs", "list", "--root", str(tmp_path)])
    fast = capsys.readouterr()
    (run.path / "summary.json").unlink()  # as a run written before summaries
    main(["runs", "list", "--root", str(tmp_path)])
    full = capsys.readouterr()
    assert run.id in fast.out and "checkpoints" not in fast.err
    assert full.out == fast.out and "1 run listed from their checkpoints" in full.err
