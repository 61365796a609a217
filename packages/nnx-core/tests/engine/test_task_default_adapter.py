"""The implicit default adapter (spec §6.3): the legacy fields per loss, probability
targets, and a custom loss called unchanged."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _support.task_adapters import close, labels, logits, ratio
from sklearn.metrics import (
    accuracy_score,
)
from torch import nn

from nnx.tasks import (
    CategoricalAdapter,
    LossOnlyAdapter,
    MultilabelAdapter,
    TaskSpec,
    task_adapter,
)

# -- the implicit default ----------------------------------------------------------------------

def test_default_for_cross_entropy_records_legacy_fields_without_task_fields() -> None:
    loss = nn.CrossEntropyLoss()
    adapter = task_adapter(None, loss)
    assert isinstance(adapter, CategoricalAdapter) and adapter.kind is None
    out, y = logits(10, 3), labels(10, 3)
    y[2] = -100  # the loss's ignore_index is honored by the default too
    edp = adapter.record(out, y, loss=1.0)
    keep = (y != -100).numpy()
    assert edp.accuracy == pytest.approx(accuracy_score(y.numpy()[keep],
                                                        out.argmax(1).numpy()[keep]))
    assert edp.kind is edp.count is edp.status is None
    assert set(edp.state()) == {"loss", "error", "accuracy", "f1", "recall", "precision"}
    close(ratio(adapter.loss_parts(out, y, loss)), loss(out, y))


def test_default_cross_entropy_accepts_class_probability_targets() -> None:
    loss = nn.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    adapter = task_adapter(None, loss)
    out = logits(6, 3)
    soft = torch.softmax(logits(6, 3, seed=5), dim=1)
    adapter.validate(out, soft)
    close(ratio(adapter.loss_parts(out, soft, loss)), loss(out, soft))
    assert adapter.record(out, soft).accuracy == pytest.approx(
        float((out.argmax(1) == soft.argmax(1)).double().mean()))


def test_default_for_bce_decodes_logit_at_zero_like_multilabel() -> None:
    adapter = task_adapter(None, nn.BCEWithLogitsLoss())
    assert isinstance(adapter, MultilabelAdapter) and adapter.kind is None
    out = torch.tensor([[-0.1, 0.0], [0.2, -2.0]])
    assert adapter.decode(out).tolist() == [[0, 1], [1, 0]]
    edp = adapter.record(out, torch.tensor([[0.0, 1.0], [1.0, 1.0]]))
    assert edp.accuracy == pytest.approx(0.5) and edp.kind is None and not edp.metrics


def test_default_for_other_losses_reports_loss_only() -> None:
    for loss in (nn.MSELoss(), nn.KLDivLoss(reduction="batchmean")):
        adapter = task_adapter(None, loss)
        assert isinstance(adapter, LossOnlyAdapter)
        out, y = logits(4, 2), torch.softmax(logits(4, 2, seed=4), 1)
        num, den = adapter.loss_parts(out, y, loss)
        close(num / den, loss(out, y))
        edp = adapter.record(out, y, loss=0.5)
        assert edp.state() == {"loss": 0.5}


def test_custom_loss_module_is_called_unchanged_and_weighted_by_its_targets() -> None:
    class Scaled(nn.Module):
        def forward(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
            return 2.0 * F.mse_loss(output, target)

    adapter = task_adapter(TaskSpec.regression(2), Scaled())
    out, y = logits(3, 2), logits(3, 2, seed=3)
    num, den = adapter.loss_parts(out, y, adapter.loss_fn)
    assert float(den) == 6
    close(num / den, 2.0 * F.mse_loss(out, y))
