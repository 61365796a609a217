"""Rewrite this folder: one real nnx-lm run and one core run, trimmed to the files
``nnx runs list`` / ``show`` read (tests/persistence/test_add_on_run_fixture.py).

Run from the workspace, where nnx-lm is installed:

    uv run python packages/nnx-core/tests/data/add_on_runs/regenerate.py

The test fails in the workspace venv when nnx-core can no longer load these runs
(a changed format or run id): regenerate them then.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import torch

from nnx import Devices, Nets, NNModelParams
from nnx.lm import NNTransformerParams
from nnx.lm_tasks import CausalLMModel, CausalLMTask
from nnx.testing import tiny_model, tiny_train_params

HERE = Path(__file__).resolve().parent
KEPT = (".history-committed-by-last", "run.yaml", "idps.csv", "checkpoints/last.pt",
        "checkpoints/last.pt.manifest.json", "checkpoints/best.pt",
        "checkpoints/best.pt.manifest.json")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        torch.manual_seed(0)
        shape = NNTransformerParams(vocab_size=5, d_model=4, n_heads=1, n_layers=1,
                                    max_seq_len=4)
        lm = CausalLMModel(shape, NNModelParams(net=Nets.TRANSFORMER, device=Devices.CPU),
                           task=CausalLMTask(vocab_size=5))
        rows = torch.randint(1, 5, (4, 4), generator=torch.Generator().manual_seed(1))
        ids = [lm.train(tiny_train_params([rows[:2], rows[2:]]), root=root, verbose=False).id,
               tiny_model().train(tiny_train_params(), root=root, verbose=False).id]
        for old in HERE.iterdir():
            if old.is_dir():
                shutil.rmtree(old)
        for run_id in ids:
            for name in KEPT:
                (HERE / run_id / name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / run_id / name, HERE / run_id / name)
        print("\n".join(ids))


if __name__ == "__main__":
    main()
