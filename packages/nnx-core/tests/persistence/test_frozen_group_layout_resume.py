"""A run whose one optimizer group left out its frozen parameters still resumes (§3.1, §14).

Until issue 26 an optimizer built without param_groups dropped the parameters frozen at
build time; it now holds every parameter. ``tests/data/frozen-groups-ab42a21/`` was
written by nnx-core at commit ab42a21 (the layout before the change) by
``tiny_model(seed=3)`` with ``layers.0.*`` frozen, trained for 2 epochs with
:func:`plan`. A stateful resume renumbers its optimizer state onto today's group. If a
test here fails, such runs became unresumable: fix the code, never the data.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from nnx import NNCheckpoint, NNOptimParams, NNTrainParams
from nnx.testing import tiny_loader, tiny_model

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "frozen-groups-ab42a21"
RUN_ID = "923c4dce43959fd3d536304ce1efd3f2"


def plan(**fields: object) -> NNTrainParams:
    fields.setdefault("n_epochs", 2)
    optim = NNOptimParams.builder().adamw(max_lr=0.05, weight_decay=0.1).build()
    return NNTrainParams(train_loader=tiny_loader(n_batches=3, seed=1), optim=optim, seed=7,
                         scheduler=None, **fields)  # type: ignore[arg-type]


def frozen_model(seed: int):
    model = tiny_model(seed=seed)
    model.freeze("layers.0.*")
    return model


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A private copy: nothing here ever writes into the shipped files."""
    copy = tmp_path / "runs"
    shutil.copytree(SHIPPED, copy, symlinks=True)
    return copy


def test_the_shipped_checkpoint_has_the_old_layout(root, tmp_path):
    assert frozen_model(3).train(plan(), verbose=False, root=tmp_path).id == RUN_ID
    saved = NNCheckpoint.load_optimizer_state(RUN_ID, "last", root=root)
    (group,) = saved["param_groups"]
    assert len(group["params"]) == 2  # layers.1 only; today's group holds all 4


def test_a_stateful_resume_continues_it_as_the_straight_run(root, tmp_path):
    straight = frozen_model(3)
    straight.train(plan(n_epochs=3), verbose=False, root=tmp_path / "straight")
    two = frozen_model(3)
    two.train(plan(), verbose=False, root=tmp_path / "local")
    shipped = NNCheckpoint.load(RUN_ID, "last", root=root).state_dict
    same_kernels = all(torch.equal(v, shipped[k]) for k, v in two.net.state_dict().items())
    resumed = frozen_model(99)  # the resume restores the weights
    rest = resumed.train(plan(n_epochs=1, resume_from_run_id=RUN_ID, resume_mode="stateful"),
                         verbose=False, root=root)
    assert [r.epoch for r in rest.epoch_records()] == [2]
    assert torch.equal(resumed.net.layers[0].weight, shipped["layers.0.weight"])  # frozen
    for key, value in straight.net.state_dict().items():
        if same_kernels:
            assert torch.equal(value, resumed.net.state_dict()[key]), key
        else:  # another CPU's kernels round the shipped epochs differently by an ulp
            torch.testing.assert_close(resumed.net.state_dict()[key], value, rtol=0, atol=1e-6)
