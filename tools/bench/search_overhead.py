"""What ``nnx.search.search`` adds to each trial beyond the trial's own ``plan.fit``.

Contenders, on the same tiny plan (a FeedFwd classifier, one epoch of 3 batches), the same
parameters in the same order (a seeded RandomSampler), in-memory storage, in one process:

* **search** — ``search(plan, space, apply=..., budget=SearchBudget(trials=N))``: the
  budget ledger, the identity record, the trial callback (pruning reports), the outcome
  and its trial attributes, one ``study.optimize(n_trials=1)`` per trial;
* **bare optuna** — ``study.optimize(objective, n_trials=N)`` whose objective suggests
  the same parameter, applies it and returns ``plan.fit().metrics["val"]`` loss: the
  least a hand-written loop does.

Each trial's ``plan.fit`` is timed where it is called (the plan that ``apply`` returns
is a subclass whose ``fit`` records its wall time), so a contender's per-trial
overhead is (its wall time − the time inside its fits) / N: what surrounds the fits,
immune to the fits' own noise. The search's trial callback runs inside its fits (one
pruning report per validated epoch), so it shows in the fit column, not in the
overhead. Repeats interleave the contenders (the order alternates)
after an untimed warm-up; figures are medians over repeats.

    uv run python tools/bench/search_overhead.py [--trials N] [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from typing import Any

import optuna
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import Devices, MonitorSpec, NNModelParams, NNOptimParams, NNParams, NNTrainParams
from nnx.extend import ExperimentPlan
from nnx.search import SearchBudget, search

X = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] + X[:, 1] > 0).long()
SPACE = {"lr": optuna.distributions.FloatDistribution(0.01, 0.3, log=True)}
FIT_SECONDS: list[float] = []  # every timed fit of the current contender


class TimedPlan(ExperimentPlan):
    """The same plan; its fit's wall time is recorded (with_* keep the subclass)."""

    def fit(self, attempt: str | None = None, *, verbose: bool | None = None) -> Any:
        started = time.perf_counter()
        try:
            return super().fit(attempt, verbose=verbose)
        finally:
            FIT_SECONDS.append(time.perf_counter() - started)


def plan() -> ExperimentPlan:
    train = NNTrainParams(n_epochs=1, optim=NNOptimParams.builder().sgd(max_lr=0.1).build(),
                          scheduler=None, monitor=MonitorSpec(metric="loss"))
    return TimedPlan(model=NNModelParams(device=Devices.CPU), train=train,
                     net=NNParams(input_dim=4, output_dim=2, hidden_dims=(8,)), seed=0
                     ).with_data(lambda: DataLoader(TensorDataset(X[:48], Y[:48]), batch_size=16),
                                 val=lambda: DataLoader(TensorDataset(X[48:], Y[48:]),
                                                        batch_size=16), identity="bench")


def apply(base: ExperimentPlan, params: dict[str, Any]) -> ExperimentPlan:
    return base.with_optim(NNOptimParams.builder().sgd(max_lr=params["lr"]).build())


def with_search(trials: int) -> float:
    search(plan(), SPACE, apply=apply, budget=SearchBudget(trials=trials),
           sampler=optuna.samplers.RandomSampler(seed=0))
    return 0.0


def with_bare_optuna(trials: int) -> float:
    base = plan()

    def objective(trial: optuna.Trial) -> float:
        params = {"lr": trial.suggest_float("lr", 0.01, 0.3, log=True)}
        return float(apply(base, params).fit(verbose=False).metrics["val"].values["loss"])

    optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).optimize(
        objective, n_trials=trials)
    return 0.0


CONTENDERS = {"search": with_search, "bare optuna": with_bare_optuna}


def run_once(name: str, trials: int) -> tuple[float, float]:
    """(wall per trial, outside-fit per trial), in seconds, in a fresh runs root."""
    FIT_SECONDS.clear()
    with tempfile.TemporaryDirectory() as root:
        here = os.getcwd()
        os.chdir(root)
        try:
            started = time.perf_counter()
            CONTENDERS[name](trials)
            wall = time.perf_counter() - started
        finally:
            os.chdir(here)
    assert len(FIT_SECONDS) == trials, (name, len(FIT_SECONDS))
    return wall / trials, (wall - sum(FIT_SECONDS)) / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    for name in CONTENDERS:  # warm-up, untimed
        run_once(name, 2)
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in CONTENDERS}
    order = list(CONTENDERS)
    for _ in range(args.repeats):
        for name in order:
            figures[name].append(run_once(name, args.trials))
        order.reverse()
    print(f"{args.trials} trials x {args.repeats} repeats, in-memory storage, medians "
          "per trial:")
    print(f"{'contender':<12} {'wall ms':>9} {'fit ms':>9} {'outside fit ms':>15}")
    medians = {}
    for name, runs in figures.items():
        wall = statistics.median(w for w, _ in runs) * 1e3
        outside = statistics.median(o for _, o in runs) * 1e3
        medians[name] = outside
        print(f"{name:<12} {wall:>9.2f} {wall - outside:>9.2f} {outside:>15.2f}")
    added = medians["search"] - medians["bare optuna"]
    print(f"search adds {medians['search']:.2f} ms per trial beyond its plan.fit "
          f"({added:+.2f} ms against the bare optuna loop); target <= 5 ms")


if __name__ == "__main__":
    main()
