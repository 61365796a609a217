"""Seeds as populations (spec §23): five seeds of two widths, compared from run ids alone.

One seed is one draw. Each configuration trains five seeds with provenance=, so every
run records its attempt, status and committed epoch. observations_from_runs then reads
the runs back from their ids (run.yaml, the history up to the committed epoch and the
provenance, nothing unpickled), summarize reports each configuration as a population
(n, mean, standard deviation with n - 1), and compare pairs the two widths seed by seed:
delta = B - A, so for the validation loss a negative delta means the wide net is lower.
The bootstrap interval describes seed variability over these five pairs, not
significance. The report is saved as nnx.comparison/1 JSON and loaded back, its results
re-derived from the stored observations.

    uv run python examples/compare_seeds.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import (
    Devices,
    MonitorSpec,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParams,
    NNTrainParams,
    set_seed,
)
from nnx.comparison import Bootstrap, ComparisonReport, compare, observations_from_runs, summarize
from nnx.provenance import ExperimentManifest

X = torch.randn(128, 4, generator=torch.Generator().manual_seed(0))
Y = (X[:, 0] * X[:, 1] > 0).long()


def train(root: Path, width: int, seed: int) -> str:
    """One seed of one width; returns its run id."""
    set_seed(seed)  # the weights' initialization is part of the draw too
    model = NNModel(NNParams(input_dim=4, output_dim=2, hidden_dims=(width,)),
                    NNModelParams(device=Devices.CPU))
    params = NNTrainParams(
        n_epochs=2, seed=seed, scheduler=None, monitor=MonitorSpec(metric="loss"),
        optim=NNOptimParams.builder().adam(max_lr=0.01).build(),
        train_loader=DataLoader(TensorDataset(X[:96], Y[:96]), batch_size=32, shuffle=True),
        val_loader=DataLoader(TensorDataset(X[96:], Y[96:]), batch_size=32))
    plan = ExperimentManifest.for_model(model, train=params, data={"train": "xor-128"},
                                        splits={"val": "last-32"})
    return model.train(params=params, provenance=plan, verbose=False, root=root).id


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        narrow = [train(root, 4, seed) for seed in range(5)]
        wide = [train(root, 32, seed) for seed in range(5)]

        # From run ids alone: no model is built, no checkpoint read.
        observations = observations_from_runs(narrow + wide, metric="loss", root=root)
        summary = summarize(observations)
        assert summary.differing == ("config",)  # two populations, never pooled
        a, b = summary.groups
        for name, group in (("narrow", a), ("wide", b)):
            print(f"{name}: n={group.n} mean={group.mean:.4f} std={group.std:.4f}")

        result = compare(a, b, pairing="seed=<s>: same split; data order drawn from the seed",
                         bootstrap=Bootstrap(seed=0))
        assert result.n == 5 and not result.unmatched
        iv = result.interval
        print(f"wide - narrow: mean {result.mean:+.4f} over {result.n} seeds, "
              f"95% bootstrap [{iv.low:+.4f}, {iv.high:+.4f}]")

        report = ComparisonReport.build(observations, [result])
        report.save(Path(tmp) / "report.json")
        again = ComparisonReport.load(Path(tmp) / "report.json")
        assert again.table() == report.table()
        print(again.text().splitlines()[0])


if __name__ == "__main__":
    main()
