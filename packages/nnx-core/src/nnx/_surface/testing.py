"""Tiny data, models and loaders for test suites: nnx-core's and every add-on's.

Everything here is seeded, CPU-only and small enough for a test to train in
milliseconds, so an add-on's suite can build its fixtures from this module
alone (docs/extending.md):

* :func:`tiny_batches` / :func:`tiny_loader` — seeded (X, y) batches, 4
  features, 3 classes, as a list or a non-shuffling ``DataLoader``;
* :func:`tiny_model` — a seeded 4 → hidden → out classifier (any ``Nets``
  member with ``net_params``: an add-on's net too);
* :func:`sgd` / :func:`tiny_train_params` — the optimizer and train params
  a one-epoch test run needs;
* :func:`weights` — a detached copy of a module's state, for "nothing
  changed" assertions after a refusal.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nnx._surface.model import NNModel
from nnx.enums.devices import Devices
from nnx.enums.losses import Losses
from nnx.enums.nets import Nets
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.params.optim import NNOptimParams
from nnx.params.task import TaskSpec
from nnx.params.train import NNTrainParams

__all__ = ["sgd", "tiny_batches", "tiny_loader", "tiny_model", "tiny_train_params", "weights"]

Batch = tuple[torch.Tensor, ...]


def tiny_batches(n_batches: int = 2, size: int = 4, *, seed: int = 0) -> list[Batch]:
    """``n_batches`` seeded (X, y) batches: 4 features, 3 classes."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n_batches * size, 4, generator=g)
    y = torch.randint(0, 3, (n_batches * size,), generator=g)
    return [(x[i:i + size], y[i:i + size]) for i in range(0, len(x), size)]


def tiny_loader(n_batches: int = 2, size: int = 4, *, seed: int = 0) -> DataLoader[Batch]:
    """The same data as :func:`tiny_batches`, as a non-shuffling ``DataLoader``."""
    x = torch.cat([b[0] for b in tiny_batches(n_batches, size, seed=seed)])
    y = torch.cat([b[1] for b in tiny_batches(n_batches, size, seed=seed)])
    return DataLoader(TensorDataset(x, y), batch_size=size, shuffle=False)


def tiny_model(seed: int = 0, *, hidden: int = 8, loss: Losses = Losses.CROSS_ENTROPY,
               task: TaskSpec | None = None, dropout: float = 0.0, out: int = 3,
               net: Nets = Nets.FEED_FWD, net_params: NNParams | None = None) -> NNModel:
    """A seeded model on the CPU: by default a 4 → hidden → out FeedFwd classifier.

    ``net`` / ``net_params`` build another member instead (``net_params`` then
    replaces the FeedFwd params entirely).
    """
    torch.manual_seed(seed)
    if net_params is None:
        net_params = NNParams(input_dim=4, output_dim=out, hidden_dims=(hidden,),
                              dropout_prob=dropout)
    return NNModel(net_params=net_params,
                   params=NNModelParams(net=net, device=Devices.CPU, loss=loss, task=task))


def sgd(lr: float = 0.1, accumulate: int = 1) -> NNOptimParams:
    """Plain SGD at ``lr``, accumulating ``accumulate`` batches per update."""
    return NNOptimParams.builder().sgd(max_lr=lr).accumulate_grad(accumulate).build()


def tiny_train_params(loader: Iterable[Any] | None = None, *, n_epochs: int = 1,
                      optim: NNOptimParams | None = None, **fields: Any) -> NNTrainParams:
    """Train params over ``loader`` (default :func:`tiny_batches`), SGD, no scheduler."""
    return NNTrainParams(n_epochs=n_epochs,
                         train_loader=tiny_batches() if loader is None else loader,
                         optim=sgd() if optim is None else optim,
                         **{"scheduler": None, **fields})


def weights(module: nn.Module | NNModel) -> dict[str, torch.Tensor]:
    """A detached copy of every parameter and buffer (``NNModel``: of its net)."""
    net = module.net if isinstance(module, NNModel) else module
    return {k: v.detach().clone() for k, v in net.state_dict().items()}
