"""Fitted temperature calibration (spec §18), offline, in seconds.

An over-trained classifier on noisy labels is over-confident. ``fit_temperature``
chooses T on a calibration split (never the training or the test split); the
calibrator serves ``softmax(logits / T)`` beside the raw view and reports, on the
untouched test split, whether NLL and Brier improved. The argmax never changes.

    uv run python examples/calibration_offline.py
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import (
    Devices,
    Losses,
    NNModel,
    NNModelParams,
    NNParams,
    NNTrainParams,
    ProbabilitySpec,
    TaskSpec,
    TemperatureCalibrator,
    fit_temperature,
)

LABELS = ("low", "mid", "high")
torch.manual_seed(0)
x = torch.randn(1500, 6)
y = (x[:, 0] + 0.5 * x[:, 1] > -0.5).long() + (x[:, 0] - x[:, 2] > 0.8).long()
noisy = torch.rand(1500) < 0.25  # a quarter of the labels are noise: confidence must drop
y[noisy] = torch.randint(0, 3, (int(noisy.sum()),))
train, cal, test = (slice(0, 200), slice(300, 900), slice(900, 1500))

model = NNModel(NNParams(input_dim=6, output_dim=3, hidden_dims=(64, 64)),
                NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY,
                              task=TaskSpec.categorical(3)))
with tempfile.TemporaryDirectory() as root:
    loader = DataLoader(TensorDataset(x[train], y[train]), batch_size=25, shuffle=True)
    run = model.train(NNTrainParams(n_epochs=80, train_loader=loader, scheduler=None, seed=0),
                      root=root, verbose=False)
model_id = f"{run.id}:LAST"  # a declared id; a weights fingerprint also works
spec = ProbabilitySpec("categorical", labels=LABELS)

# 1. Fit on the calibration split: the model never trained on it, the test split stays out.
cal_prediction = model.predict_proba(x[cal], spec)
fit = fit_temperature(cal_prediction, y[cal].numpy(), split_id="cal", train_split_id="train",
                      test_split_id="test", model_id=model_id)
calibrator = fit.require()
print(f"fit: {fit.status}, T = {calibrator.temperature:.4f} after {fit.iterations} search steps")
assert calibrator.temperature > 1.0  # over-confident: the temperature softens it

# 2. Serve: raw and calibrated views side by side, same argmax, the prediction's ids kept.
test_prediction = model.predict_proba(x[test], spec)
served = calibrator.transform(test_prediction, model_id=model_id)
assert (served.calibrated_probabilities.argmax(axis=1) == served.class_indices).all()
assert (served.sample_ids == test_prediction.sample_ids).all()
print(f"row 0: raw {served.probabilities[0].round(3)} -> calibrated "
      f"{served.calibrated_probabilities[0].round(3)} ({served.decoded[0]})")

# 3. Report on the held-out test split: did it help?
report = calibrator.report(test_prediction, y[test].numpy(), split_id="test",
                           model_id=model_id)
print(report.summary())
assert report.outcome == "improved"

# 4. Save and reload: the temperature is float64-exact, the report equal.
with tempfile.TemporaryDirectory() as folder:
    path = Path(folder) / "calibrator.json"
    calibrator.save(path)
    again = TemperatureCalibrator.load(path)
assert again.report(test_prediction, y[test].numpy(), split_id="test",
                    model_id=model_id) == report
print(f"reloaded {again.calibrator_id[:12]}: identical temperature {again.temperature!r}")
