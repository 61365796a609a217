"""A run the previous release wrote reads, verifies and resumes bit for bit (spec §4, §14.3).

``tests/data/release-eed5ca2/`` is a runs root written by nnx-core at commit
eed5ca2, the release before the layer move (issue 14), by
``tiny_model(seed=3)`` trained for 2 epochs with :func:`plan`. Its files are
the on-disk contract: the format markers in checkpoints and manifests, the
sidecars, idps.csv and the runs/best pointer. If a test here fails, runs users
already have became unreadable: fix the code, never the data.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from nnx import NNCheckpoint, NNRun, NNTrainParams
from nnx.cli import main
from nnx.testing import sgd, tiny_loader, tiny_model

SHIPPED = Path(__file__).resolve().parents[1] / "data" / "release-eed5ca2"
RUN_ID = "c5d4e970fecb7a238004ff018ef278bf"


def plan(**fields: object) -> NNTrainParams:
    fields.setdefault("n_epochs", 2)
    return NNTrainParams(train_loader=tiny_loader(n_batches=3, seed=1),
                         val_loader=tiny_loader(n_batches=1, seed=2), optim=sgd(), seed=7,
                         **fields)  # type: ignore[arg-type]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A private copy: nothing here ever writes into the shipped files."""
    copy = tmp_path / "runs"
    shutil.copytree(SHIPPED, copy, symlinks=True)
    return copy


def test_today_s_code_computes_the_shipped_run_s_id(tmp_path):
    assert tiny_model(seed=3).train(plan(), verbose=False, root=tmp_path).id == RUN_ID


def test_the_shipped_run_loads_with_its_history_and_checkpoints(root):
    run = NNRun.load(RUN_ID, root=root)
    assert run.committed_epoch() == 1
    assert [(r.epoch, r.batch_idx) for r in run.idps] == [(e, b) for e in (0, 1)
                                                          for b in range(3)]
    for tag, epoch in (("first", 0), ("last", 1), ("best", 0)):
        point = NNCheckpoint.resume_point(RUN_ID, tag, root=root)
        assert (point.tag, point.position["completed_epoch"]) == (tag, epoch)
        assert NNCheckpoint.load(RUN_ID, tag, root=root).epoch == epoch
    assert (root / "best").resolve().name == RUN_ID


def test_nnx_runs_verify_passes_the_shipped_run(root, monkeypatch, capsys):
    monkeypatch.chdir(root.parent)
    assert main(["runs", "verify", RUN_ID]) == 0
    assert "ok  last  generation" in capsys.readouterr().out


def test_a_stateful_resume_continues_the_shipped_run_bit_for_bit(root, tmp_path):
    """Bit for bit where this machine computes the shipped epochs bit for bit. The shipped
    run was trained on another CPU; where this one's kernels round differently (AVX-512
    against AVX2: the shipped LAST then differs from a local 2-epoch run by an ulp), the
    continuation is compared to the same tolerance, and the resume's own exactness is
    shown by a local run split at the same epoch."""
    straight = tiny_model(seed=3)
    straight.train(plan(n_epochs=3), verbose=False, root=tmp_path / "straight")
    two = tiny_model(seed=3)
    local = two.train(plan(), verbose=False, root=tmp_path / "local")
    shipped_last = NNCheckpoint.load(RUN_ID, "last", root=root).state_dict
    same_kernels = all(torch.equal(v, shipped_last[k]) for k, v in two.net.state_dict().items())
    resumed = tiny_model(seed=99)  # the resume restores the weights
    rest = resumed.train(plan(n_epochs=1, resume_from_run_id=RUN_ID, resume_mode="stateful"),
                         verbose=False, root=root)
    assert [r.epoch for r in rest.epoch_records()] == [2]
    for key, value in straight.net.state_dict().items():
        if same_kernels:
            assert torch.equal(value, resumed.net.state_dict()[key]), key
        else:
            torch.testing.assert_close(resumed.net.state_dict()[key], value, rtol=0, atol=1e-6)
    split = tiny_model(seed=99)
    split.train(plan(n_epochs=1, resume_from_run_id=local.id, resume_mode="stateful"),
                verbose=False, root=tmp_path / "local")
    for key, value in straight.net.state_dict().items():
        assert torch.equal(value, split.net.state_dict()[key]), key
