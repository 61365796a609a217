"""A calibrator bound to a model's fingerprint refuses the same model with another head
(spec §18 "Identity binding", issue 36 item 7): model_fingerprint hashes every weight of
a wrapper, not only the backbone under its ``net``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from nnx.calibration import CalibrationMismatchError, fit_temperature, model_fingerprint

LABELS = ["a", "b", "c"]


class _Wrapper(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = nn.Linear(4, 8)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.net(x)))


def test_a_calibrator_bound_to_a_wrapper_refuses_it_once_the_head_changes():
    wrapper = _Wrapper()
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.normal(size=(200, 4)).astype(np.float32))
    with torch.no_grad():
        logits = wrapper(x).numpy() * 3.0
    targets = np.asarray(logits.argmax(axis=1))
    flip = rng.random(200) < 0.3
    targets[flip] = rng.integers(0, 3, size=int(flip.sum()))
    calibrator = fit_temperature(logits, targets, LABELS, model_id=model_fingerprint(wrapper),
                                 split_id="cal", train_split_id="train",
                                 test_split_id="test").require()
    calibrator.transform(logits, labels=LABELS, model_id=model_fingerprint(wrapper))
    with torch.no_grad():
        wrapper.head.weight.add_(0.5)  # same backbone under .net, another head
    with pytest.raises(CalibrationMismatchError):
        calibrator.transform(logits, labels=LABELS, model_id=model_fingerprint(wrapper))
