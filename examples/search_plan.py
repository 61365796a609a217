"""Budgeted experiment search (spec §29): an Optuna study over an ExperimentPlan.

A base plan (a tiny FeedFwd classifier, data as zero-argument factories) is searched
over its learning rate and hidden width. Each trial's parameters go through
``apply(plan, params)``, which returns a new plan; every trial is its own fit, attempt
and run, scored by the plan's validation monitor at its BEST epoch.

1. A GridSampler of 3 points with a budget of 10 trials ends "exhausted" after 3.
2. A stored SQLite study with an update cap and a MedianPruner: run for 2 trials, then
   continued to 4 (a second run of this script finds the budget spent and runs none).
3. The same stored study, asked to search another space, is refused before any trial.

    uv run python examples/search_plan.py
"""

from __future__ import annotations

from pathlib import Path

import optuna
import torch
from optuna.distributions import CategoricalDistribution, FloatDistribution
from torch.utils.data import DataLoader, TensorDataset

from nnx import Devices, MonitorSpec, NNModelParams, NNOptimParams, NNParams, NNTrainParams
from nnx.plans import ExperimentPlan
from nnx.search import SearchBudget, StudyMismatchError, search

X = torch.randn(96, 4, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] + X[:, 1] > 0).long()


def train_loader() -> DataLoader:
    return DataLoader(TensorDataset(X[:64], Y[:64]), batch_size=16)


def val_loader() -> DataLoader:
    return DataLoader(TensorDataset(X[64:], Y[64:]), batch_size=32)


def apply(plan: ExperimentPlan, params: dict) -> ExperimentPlan:
    plan = plan.with_optim(NNOptimParams.builder().sgd(max_lr=params["lr"]).build())
    if "width" in params:
        plan = plan.with_net(NNParams(input_dim=4, output_dim=2, hidden_dims=(params["width"],)))
    return plan


def main() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    train = NNTrainParams(n_epochs=3, optim=NNOptimParams.builder().sgd(max_lr=0.1).build(),
                          scheduler=None, monitor=MonitorSpec(metric="loss"))
    base = (ExperimentPlan(model=NNModelParams(device=Devices.CPU), train=train,
                           net=NNParams(input_dim=4, output_dim=2, hidden_dims=(8,)), seed=0)
            .with_data(train_loader, val=val_loader, identity="toy-v1"))

    # 1. A grid runs out before the budget does.
    grid = search(base, {"lr": FloatDistribution(0.01, 0.5, log=True)}, apply=apply,
                  budget=SearchBudget(trials=10),
                  sampler=optuna.samplers.GridSampler({"lr": [0.02, 0.1, 0.4]}))
    assert grid.stop_reason == "exhausted" and len(grid.outcomes) == 3
    best = grid.best
    assert best is not None and best.state == "completed"
    print(f"grid: {len(grid.outcomes)} trials, {grid.stop_reason}; best lr={best.params['lr']} "
          f"val loss={best.value:.4f} (epoch {best.best_epoch}, run {best.run_id})")

    # 2. A stored study: 2 trials now, continued to 4 later; each trial stops right after
    #    its 6th optimizer update (4 batches an epoch: inside epoch 1, so LAST is epoch 0's).
    space = {"lr": FloatDistribution(0.01, 0.5, log=True),
             "width": CategoricalDistribution((4, 8, 16))}
    stored = {"study_name": "toy-search", "storage": f"sqlite:///{Path('search.db').resolve()}",
              "pruner": optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=0),
              "sampler": optuna.samplers.RandomSampler(seed=0)}
    first = search(base, space, apply=apply,
                   budget=SearchBudget(trials=2, updates_per_trial=6), **stored)
    later = search(base, space, apply=apply,
                   budget=SearchBudget(trials=4, updates_per_trial=6), **stored)
    assert later.counted == 4 and later.stop_reason == "budget"
    for outcome in (*first.outcomes, *later.outcomes):
        assert outcome.updates <= 6 and outcome.epochs <= 1
        print(f"trial {outcome.number}: {outcome.state} ({outcome.reason}) "
              f"params={dict(outcome.params)} value={outcome.value} updates={outcome.updates}")
    print(f"stored study {later.study_name!r}: {later.counted} trials counted")

    # 3. Another space on the same stored study is refused before any trial.
    try:
        search(base, {"lr": FloatDistribution(0.001, 0.5, log=True)}, apply=apply,
               budget=SearchBudget(trials=8), **stored)
    except StudyMismatchError as exc:
        print(f"refused: {exc.fields}")
    else:
        raise AssertionError("a different space must be refused")
    assert later.counted == len(optuna.load_study(study_name="toy-search",
                                                  storage=stored["storage"]).trials)


if __name__ == "__main__":
    main()
