"""Branching builders with copy() and from_params(): one base, several runs (spec §2.4).

A partial optimizer builder (clipping, no variant yet) branches into AdamW and
SGD; a Trainer builder branches into sibling runs over different data splits
(``data_id``) and a scheduled variant. Setters on a branch never reach the
base or a value already built, ``from_params(p).build() == p`` with the same
state (hence the same run id), and a foreign value is refused by type. Each
branch then trains for two epochs; the sibling runs get distinct run ids.

    uv run python examples/builder_branching.py
"""

from __future__ import annotations

import tempfile

import torch
from torch import nn

from nnx import (
    Devices,
    Losses,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNOptimParamsBuilder,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainerParamsBuilder,
    Trainer,
    supervised_objective,
)


def batches(seed: int, n_batches: int = 4, size: int = 16) -> list[tuple[torch.Tensor, ...]]:
    """A seeded 3-class toy split: the two "splits" below differ only in their seed."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_batches * size, 4, generator=g)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def main() -> None:
    # 1. A partial optimizer builder: a modifier, no variant yet. Branch it twice.
    base = NNOptimParams.builder().grad_clip(1.0)
    adamw = base.copy().adamw(max_lr=1e-2).build()
    sgd = base.copy().sgd(max_lr=0.05, momentum=0.9).build()
    assert adamw.grad_clip_norm == sgd.grad_clip_norm == 1.0
    base.grad_clip(5.0)  # the base moves on; neither built value changes
    assert adamw.grad_clip_norm == 1.0 and sgd.grad_clip_norm == 1.0
    print(f"optimizer branches: {adamw.name.name} and {sgd.name.name}, both clipped at 1.0")

    # 2. A Trainer builder shared by sibling runs over two data splits.
    split_a, split_b = batches(seed=1), batches(seed=2)
    plateau = NNSchedulerParams.builder().reduce_on_plateau(factor=0.5, patience=1).build()
    trainer = NNTrainerParams.builder().n_epochs(2).seed(0).optimizer("net", adamw)
    plain = trainer.copy().train_loader(split_a).data_id("split-a").build()
    scheduled = (trainer.copy().train_loader(split_b).data_id("split-b")
                 .scheduler("net", plateau).build())
    assert not plain.schedulers and scheduled.schedulers["net"] is plateau
    assert plain.optims["net"] is adamw  # params values are shared by identity

    # 3. from_params: pre-load a builder from a built value; unchanged, it rebuilds it exactly.
    again = NNTrainerParamsBuilder.from_params(plain).build()
    assert again == plain and list(again.state()) == list(plain.state())
    swapped = NNTrainerParamsBuilder.from_params(plain).optimizer("net", sgd).build()
    assert NNOptimParamsBuilder.from_params(sgd).build().state() == sgd.state()
    try:
        NNOptimParamsBuilder.from_params(plateau)  # type: ignore[arg-type]
    except TypeError as exc:
        print(f"from_params refuses a foreign value: {exc}")
    else:
        raise AssertionError("from_params accepted a scheduler's params")

    # 4. Train every branch: three configurations, three run ids.
    ids = {}
    with tempfile.TemporaryDirectory() as root:
        for name, params in (("plain", plain), ("scheduled", scheduled), ("sgd", swapped)):
            torch.manual_seed(0)
            model = NNModel(module=nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 3)),
                            params=NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))
            run = Trainer(model).train(params, objective=supervised_objective(), verbose=False,
                                       root=root)
            ids[name] = run.id
            last = run.idps[-1].train_edp
            assert last is not None and last.loss is not None
            print(f"{name:>9}: run {run.id}  last train loss {last.loss:.3f}")
    assert len(set(ids.values())) == 3, ids


if __name__ == "__main__":
    main()
