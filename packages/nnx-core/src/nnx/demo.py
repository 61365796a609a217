"""``nnx demo``: the foundation at work on embedded, generated data.

It declares a run as configuration (net, model, optimizer, schedule), shows
the run id that configuration hashes to, builds the net through ``Nets``, the
optimizer through the shared build hook and the schedule through
``Schedulers``, and trains a three-class spiral classifier for a few seconds.
NNModel.train, with run directories and checkpoints, takes over this loop
when the training surface lands; the configuration and its id stay the same.
"""

from __future__ import annotations

import math
import time

import torch

from nnx.enums.activations import Activations
from nnx.enums.nets import Nets
from nnx.identity import run_id
from nnx.optimizers import build_optimizer
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.params.optim import NNOptimParams, NNParamGroupSpec
from nnx.params.scheduler import NNSchedulerParams
from nnx.params.train import NNTrainParams

__all__ = ["make_spirals", "run_demo"]


def make_spirals(n_per_class: int = 300, classes: int = 3, seed: int = 0
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """Interleaved noisy spirals: a small problem a linear model cannot solve."""
    gen = torch.Generator().manual_seed(seed)
    xs, ys = [], []
    for c in range(classes):
        r = torch.linspace(0.05, 1.0, n_per_class)
        theta = torch.linspace(0, 4.0, n_per_class) + c * 2 * math.pi / classes
        theta = theta + 0.2 * torch.randn(n_per_class, generator=gen)
        xs.append(torch.stack([r * torch.sin(theta), r * torch.cos(theta)], dim=1))
        ys.append(torch.full((n_per_class,), c, dtype=torch.long))
    x, y = torch.cat(xs), torch.cat(ys)
    order = torch.randperm(len(y), generator=gen)
    return x[order], y[order]


def run_demo(epochs: int = 20, seed: int = 0) -> int:
    # A 64-wide MLP gains nothing from intra-op threads and loses a lot to them
    # when another process shares the cores; the demo's own process uses one.
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    x, y = make_spirals(seed=seed)
    split = int(0.8 * len(y))
    (x_tr, y_tr), (x_va, y_va) = (x[:split], y[:split]), (x[split:], y[split:])

    net_params = NNParams(input_dim=2, output_dim=3, hidden_dims=(64, 64),
                          activation=Activations.GELU)
    model_params = NNModelParams(net=Nets.FEED_FWD)
    optim = (NNOptimParams.builder()
             .adamw(max_lr=1e-2, weight_decay=1e-2)
             .param_groups([NNParamGroupSpec(name_pattern="*.bias", weight_decay=0.0)])
             .build())
    schedule = NNSchedulerParams.builder().cosine_annealing(min_lr=1e-4).build()
    train = NNTrainParams(n_epochs=epochs, optim=optim, scheduler=schedule, seed=seed,
                          data_id=f"spirals-3x300-seed{seed}")
    rid = run_id(model=model_params, net=net_params, train=train)
    print(f"run id {rid}  (md5 of the configuration: same config, same id)")

    net = model_params.net(net_params)
    optimizer = build_optimizer(net, train.optim)
    assert train.scheduler is not None
    scheduler = train.scheduler.resolved_kind(optimizer, train.scheduler, epochs)
    loss_fn = model_params.loss()
    groups = ", ".join(f"{g['name']} (lr {g['lr']:g}, wd {g['weight_decay']:g})"
                       for g in optimizer.param_groups)
    print(f"net {type(net).__name__} {net_params.hidden_dims}, "
          f"{type(optimizer).__name__}: {groups}")

    start = time.perf_counter()
    batch = 64
    print(f"{'epoch':>5}  {'train loss':>10}  {'val loss':>8}  {'val acc':>7}  {'lr':>8}")
    for epoch in range(epochs):
        net.train()
        order = torch.randperm(len(y_tr))
        total = 0.0
        for i in range(0, len(order), batch):
            idx = order[i:i + batch]
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(net(x_tr[idx]), y_tr[idx])
            loss.backward()
            optimizer.step()
            total += float(loss.detach()) * len(idx)
        scheduler.step()
        net.eval()
        with torch.no_grad():
            logits = net(x_va)
            val_loss = float(loss_fn(logits, y_va))
            acc = float((logits.argmax(1) == y_va).float().mean())
        lr = optimizer.param_groups[0]["lr"]
        print(f"{epoch:>5}  {total / len(y_tr):>10.4f}  {val_loss:>8.4f}  {acc:>7.1%}  {lr:>8.2e}")
    print(f"trained {epochs} epochs in {time.perf_counter() - start:.1f}s; "
          f"final validation accuracy {acc:.1%}")
    return 0
