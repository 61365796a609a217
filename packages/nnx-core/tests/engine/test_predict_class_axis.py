"""predict() decodes on the net's declared class axis (issue 26 item 13).

A classifier's ``(N, C)`` logits decode on axis 1 as before; a net whose classes lie
on another axis (a language model's ``(batch, seq, vocab)``) declares ``class_axis``
and ``predict()`` takes the argmax there, never over the sequence.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nnx import Devices, NNModel, NNModelParams, NNParams, TaskSpec
from nnx.extend import decode_on_axis, net_class_axis


class SequenceLogits(nn.Module):
    """(batch, seq) ids → (batch, seq, classes) logits: classes on the last axis."""

    class_axis = -1

    def __init__(self, classes: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(classes, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embed(ids)


def seq_model(module: nn.Module, **params: object) -> NNModel:
    torch.manual_seed(0)
    return NNModel(module=module, params=NNModelParams(device=Devices.CPU, **params))


def test_batch_seq_vocab_logits_give_batch_seq_classes() -> None:
    model = seq_model(SequenceLogits())
    result = model.predict(torch.randint(0, 32, (2, 4), generator=torch.Generator().manual_seed(1)))
    assert tuple(result.logits.shape) == (2, 4, 32)
    assert tuple(result.classes.shape) == (2, 4)
    assert torch.equal(result.classes, result.logits.argmax(-1))


def test_a_classifier_still_decodes_on_axis_1() -> None:
    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                    params=NNModelParams(device=Devices.CPU))
    assert net_class_axis(model.net) is None
    result = model.predict(torch.randn(5, 4))
    assert tuple(result.classes.shape) == (5,)
    assert torch.equal(result.classes, result.logits.argmax(1))


def test_the_declared_task_s_probabilities_use_the_same_axis() -> None:
    model = seq_model(SequenceLogits(), task=TaskSpec.categorical(32))
    ids = torch.randint(0, 32, (2, 4), generator=torch.Generator().manual_seed(2))
    proba = model.predict_proba(ids)
    assert proba.spec.class_axis == 2 and proba.probabilities is not None
    torch.testing.assert_close(proba.probabilities.sum(-1), torch.ones(2, 4))
    assert torch.equal(proba.class_indices, model.predict(ids).classes)


def test_an_elementwise_decoding_keeps_the_logits_layout() -> None:
    logits = torch.randn(2, 4, 3)
    decoded = decode_on_axis(lambda out: (out >= 0).long(), logits, -1)
    assert torch.equal(decoded, (logits >= 0).long())
    assert torch.equal(decode_on_axis(lambda out: out.argmax(1), logits, None),
                       logits.argmax(1))


@pytest.mark.parametrize(("axis", "error", "match"), [
    ("last", TypeError, r"SequenceLogits\.class_axis must be an int"),
    (True, TypeError, r"class_axis must be an int"),
    (0, ValueError, r"class_axis=0 is not a class axis of its output of shape \(2, 4, 32\)"),
    (3, ValueError, r"class_axis=3 is not a class axis"),
])
def test_a_bad_class_axis_is_refused(axis: object, error: type, match: str) -> None:
    net = SequenceLogits()
    net.class_axis = axis  # type: ignore[assignment]
    model = seq_model(net)
    with pytest.raises(error, match=match):
        model.predict(torch.zeros(2, 4, dtype=torch.long))
    assert model.net.training  # the mode was restored (or never touched)
