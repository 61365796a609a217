"""Abstention and risk-coverage (spec §19), offline, in seconds.

A classifier that must answer every row cannot decline an uncertain one. Here a
threshold on the margin between the top two probabilities is tuned on a validation
split (never the test split) to keep the selective risk under a ceiling, then applied to
the test split: coverage over every row, risk over the accepted rows only.

    uv run python examples/abstention_offline.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import (
    AbstentionPolicy,
    CoverageAccumulator,
    Devices,
    Losses,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    ProbabilitySpec,
    TaskSpec,
    risk_coverage_curve,
    select_threshold,
)

LABELS = ("low", "mid", "high")
torch.manual_seed(0)
x = torch.randn(1400, 6)
y = (x[:, 0] + 0.5 * x[:, 1] > -0.5).long() + (x[:, 0] - x[:, 2] > 0.8).long()
noisy = torch.rand(1400) < 0.15
y[noisy] = torch.randint(0, 3, (int(noisy.sum()),))
train, val, test = (slice(0, 600), slice(600, 1000), slice(1000, 1400))

model = NNModel(NNParams(input_dim=6, output_dim=3, hidden_dims=(32,)),
                NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY,
                              task=TaskSpec.categorical(3)))
with tempfile.TemporaryDirectory() as root:
    loader = DataLoader(TensorDataset(x[train], y[train]), batch_size=50, shuffle=True)
    run = model.train(NNTrainParams(n_epochs=15, train_loader=loader, scheduler=None, seed=0),
                      root=root, verbose=False)
model_id = f"{run.id}:LAST"
spec = ProbabilitySpec("categorical", labels=LABELS)
val_prediction = model.predict_proba(x[val], spec)
test_prediction = model.predict_proba(x[test], spec)
y_val, y_test = y[val].numpy(), y[test].numpy()

# 1. Tune on the validation split: the highest coverage whose risk stays at or under 10%.
selection = select_threshold(val_prediction, y_val, kind="margin", risk_ceiling=0.10,
                             split_id="val", test_split_id="test", model_id=model_id)
policy = selection.require()
print(f"{len(selection.candidates)} candidates; chosen margin >= {policy.threshold:.4f} "
      f"(an actual validation score)")

# 2. Apply to the test split: coverage over every row, risk over the accepted ones.
result = policy.apply(test_prediction, model_id=model_id)
report = result.report(y_test)
everything = result.predictions != y_test
print(f"test: coverage {report.coverage:.3f} ({report.accepted}/{report.total}), selective "
      f"risk {report.selective_risk:.3f} vs {everything.mean():.3f} answering every row")
assert report.selective_risk < everything.mean()  # declining the unsure rows paid off
accepted = result.accepted_rows(y_test)  # what a hard-label report may see
assert len(accepted.predictions) == report.accepted

# 3. The same report in chunks, each with the prediction's own sample ids.
acc = CoverageAccumulator()
for lo in range(0, 400, 128):
    part = model.predict_proba(x[test][lo:lo + 128], spec)
    ids = test_prediction.sample_ids[lo:lo + 128]
    chunk = policy.apply(part.probabilities.numpy(), labels=LABELS, model_id=model_id,
                         sample_ids=ids)
    acc.add(chunk, y_test[lo:lo + 128])
assert acc.report() == report
print("chunked coverage equals the eager report")

# 4. The whole trade-off on the validation split, ending at the accept-none endpoint.
curve = risk_coverage_curve(val_prediction, y_val, kind="margin", model_id=model_id)
steps = curve.points[:-1]
for point in steps[:: max(1, len(steps) // 5)]:
    risk = "n/a" if point.risk is None else f"{point.risk:.3f}"
    print(f"  threshold {point.threshold:.4f}: coverage {point.coverage:.3f}, risk {risk}")
print(f"  endpoint: coverage {curve.endpoint.coverage}, risk {curve.endpoint.risk}")

# 5. The policy is nnx.abstention/1 JSON; it reloads float64-exact.
with tempfile.TemporaryDirectory() as folder:
    policy.save(Path(folder) / "policy.json")
    assert AbstentionPolicy.load(Path(folder) / "policy.json") == policy
print("policy saved and reloaded")
