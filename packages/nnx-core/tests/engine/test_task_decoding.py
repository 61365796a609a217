"""Task adapters' decoding, probabilities and user-metric inputs (spec §6.3)."""

from __future__ import annotations

import pytest
import torch
from _support.task_adapters import NAN, close, labels, logits
from torch import nn

from nnx.tasks import (
    TaskSpec,
    task_adapter,
)

# -- decoding, probabilities and user-metric inputs --------------------------------------------

def test_decode_and_probabilities_per_kind() -> None:
    out = logits(5, 3)
    cat = task_adapter(TaskSpec.categorical(3), nn.NLLLoss())
    assert torch.equal(cat.decode(out), out.argmax(1))
    close(cat.probabilities(out).sum(1), torch.ones(5, dtype=torch.float64))
    ml = task_adapter(TaskSpec.multilabel(3), nn.BCEWithLogitsLoss())
    close(ml.probabilities(out), torch.sigmoid(out))
    reg = task_adapter(TaskSpec.regression(3), nn.MSELoss())
    assert reg.decode(out) is out
    with pytest.raises(ValueError, match=r"has no probabilities"):
        reg.probabilities(out)


def test_extra_metric_inputs_are_valid_targets_only() -> None:
    out, y = logits(6, 3), labels(6, 3)
    y[1] = -100
    t, p = task_adapter(TaskSpec.categorical(3, ignore_index=-100),
                        nn.CrossEntropyLoss()).extra_metric_inputs(out, y)
    assert t.tolist() == [v for i, v in enumerate(y.tolist()) if i != 1]
    assert p.tolist() == [v for i, v in enumerate(out.argmax(1).tolist()) if i != 1]

    out, y = torch.tensor([[1.0, -1.0], [-1.0, 1.0]]), torch.tensor([[1.0, NAN], [1.0, 1.0]])
    t, p = task_adapter(TaskSpec.multilabel(2), nn.BCEWithLogitsLoss()).extra_metric_inputs(
        out, y)
    assert t.tolist() == [1, 1, 1] and p.tolist() == [1, 0, 1]

    out, y = torch.tensor([[0.5], [1.5]]), torch.tensor([NAN, 2.0])
    t, p = task_adapter(TaskSpec.regression(1), nn.L1Loss()).extra_metric_inputs(out, y)
    assert t.tolist() == [2.0] and p.tolist() == [1.5]
