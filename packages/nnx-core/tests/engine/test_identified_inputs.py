"""Inputs that name their rows' sample ids (spec §3.1; nnx.extend.IdentifiedInputs, the
seam nnx-graph's seed rows use): predict_proba and iter_predict report those ids."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from nnx import Devices, Losses, NNModel, NNModelParams, TaskSpec
from nnx._engine.prediction import ProbabilitySpec
from nnx.extend import IdentifiedInputs
from nnx.streaming import concatenate_predictions
from nnx.tasks.row_ids import batch_row_ids


@dataclass(frozen=True)
class Rows:
    x: torch.Tensor
    ids: torch.Tensor

    def sample_ids(self) -> torch.Tensor:
        return self.ids


class ScoreRows(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 2)

    def forward(self, rows: Rows) -> torch.Tensor:
        out: torch.Tensor = self.linear(rows.x)
        return out


def _batches() -> list[tuple[Rows, torch.Tensor]]:
    g = torch.Generator().manual_seed(0)
    return [(Rows(torch.randn(2, 3, generator=g), torch.tensor([40, 7])), torch.tensor([0, 1])),
            (Rows(torch.randn(1, 3, generator=g), torch.tensor([13])), torch.tensor([1]))]


def _model(task: TaskSpec | None = None) -> NNModel:
    torch.manual_seed(0)
    return NNModel(module=ScoreRows(), params=NNModelParams(
        loss=Losses.CROSS_ENTROPY, device=Devices.CPU, task=task))


def test_predict_proba_reports_the_ids_the_inputs_name_through_concatenation() -> None:
    assert isinstance(_batches()[0][0], IdentifiedInputs)
    result = _model().predict_proba(_batches(), ProbabilitySpec(kind="categorical"))
    assert result.sample_ids.tolist() == [40, 7, 13]
    declared = _model(TaskSpec.categorical(2)).predict_proba(_batches())
    assert declared.sample_ids.tolist() == [40, 7, 13]


def test_iter_predict_reports_them_per_batch() -> None:
    with _model(TaskSpec.categorical(2)).iter_predict(_batches(), rich=True) as stream:
        batches = list(stream)
    assert [b.sample_ids.tolist() for b in batches] == [[40, 7], [13]]
    assert np.array_equal(concatenate_predictions(batches).sample_ids, [40, 7, 13])


def test_plain_batches_keep_their_positions() -> None:
    plain = [(torch.zeros(2, 3), torch.tensor([0, 1]))]
    assert batch_row_ids(plain) is None and batch_row_ids(plain[0]) is None
    mixed = [_batches()[0], plain[0]]  # one unidentified batch: positions for all
    assert batch_row_ids(mixed) is None
