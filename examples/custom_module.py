"""Your own nn.Module in NNx: a registered factory and a wrapped keyword-input module (§3.2).

Two ways in, both recorded as a descriptor, never as code:

* ``ModelSpec("example.encoder", 1, config, seed=0)`` names a factory
  registered with ``register_model_factory``. The run is reconstructible:
  ``NNModel.from_checkpoint`` rebuilds the module through the registry and
  loads the weights after checking their names and shapes.
* ``NNModel(module=instance, batch_adapter=KeywordInputs(...))`` wraps a
  module you built, as is (``model.net is instance``), and feeds it mapping
  batches as keyword arguments. Its checkpoints say ``reconstructible=False``,
  so reloading needs a fresh instance of the same topology.

Both runs are trained, reloaded and printed (the descriptor shows where a
built-in net shows its dims). Runs go to a temporary directory.

    uv run python examples/custom_module.py
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from nnx import (
    Devices,
    KeywordInputs,
    Losses,
    MissingModelFactoryError,
    ModelSpec,
    NNCheckpoint,
    NNDataset,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNRun,
    NNTrainParams,
    register_model_factory,
)


class Encoder(nn.Module):
    """A plain positional-input classifier, built by the registered factory."""

    def __init__(self, input_dim: int = 5, width: int = 16, n_classes: int = 2) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(input_dim, width), nn.ReLU())
        self.head = nn.Linear(width, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class TokenEncoder(nn.Module):
    """A keyword-input module in the style of a transformer encoder: mean-pooled embeddings."""

    def __init__(self, vocab: int = 20, width: int = 8, n_classes: int = 3) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, n_classes)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = attention_mask.unsqueeze(-1).float()
        pooled = (self.embed(input_ids) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        return self.head(pooled)


def encoder_factory(config: Mapping[str, Any]) -> nn.Module:
    return Encoder(**config)  # config arrives read-only: JSON-like values only


def tabular() -> NNDataset:
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 5, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long()
    return NNDataset(x, y, val_proportion=0.25, batch_sizes=(16, None, None), seed=7)


def token_loader() -> DataLoader[dict[str, torch.Tensor]]:
    """Mapping batches {input_ids, attention_mask, labels}; the label is the first token mod 3."""
    g = torch.Generator().manual_seed(5)
    rows = []
    for _ in range(48):
        ids = torch.randint(0, 20, (6,), generator=g)
        mask = (torch.rand(6, generator=g) > 0.2).long()
        mask[0] = 1
        rows.append({"input_ids": ids, "attention_mask": mask,
                     "labels": torch.tensor(int(ids[0]) % 3)})
    return DataLoader(rows, batch_size=8)


def adam() -> NNOptimParams:
    return NNOptimParams.builder().adam(max_lr=3e-2).build()


def registered_encoder(root: str) -> None:
    register_model_factory("example.encoder", 1, encoder_factory)
    spec = ModelSpec("example.encoder", 1, {"width": 16}, seed=0)
    model = NNModel(params=NNModelParams(net=spec, device=Devices.CPU,
                                         loss=Losses.CROSS_ENTROPY))
    data = tabular()
    run = model.train(NNTrainParams(n_epochs=3, train_loader=data.train_loader,
                                    val_loader=data.val_loader, optim=adam(), seed=0),
                      verbose=False, root=root)
    checkpoint = NNCheckpoint.load(run.id, root=root)
    assert checkpoint.reconstructible
    rebuilt = NNModel.from_checkpoint(checkpoint)  # through the registry: no module needed
    x = torch.randn(4, 5)
    assert torch.equal(rebuilt.predict(x).logits, model.predict(x).logits)
    print(NNRun.load(run.id, root=root))
    print("reconstructed from the registry: identical predictions\n")


def wrapped_keyword_module(root: str) -> None:
    keywords = KeywordInputs(("input_ids", "attention_mask"), target="labels")
    torch.manual_seed(0)
    mine = TokenEncoder()
    model = NNModel(module=mine, params=NNModelParams(device=Devices.CPU,
                                                      loss=Losses.CROSS_ENTROPY),
                    batch_adapter=keywords)
    assert model.net is mine  # never cloned or re-initialized
    run = model.train(NNTrainParams(n_epochs=3, train_loader=token_loader(),
                                    val_loader=token_loader(), optim=adam(), seed=0),
                      verbose=False, root=root)
    assert model.net is mine
    checkpoint = NNCheckpoint.load(run.id, root=root)
    assert checkpoint.reconstructible is False
    try:
        NNModel.from_checkpoint(checkpoint)
    except MissingModelFactoryError as exc:
        print(f"without module=: {type(exc).__name__}: {exc}")
    else:
        raise AssertionError("a runtime checkpoint reloaded without its module")
    fresh = TokenEncoder()
    reloaded = NNModel.from_checkpoint(checkpoint, module=fresh, batch_adapter=keywords)
    assert reloaded.net is fresh
    batch = next(iter(token_loader()))
    inputs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    assert torch.equal(reloaded.predict(inputs).logits, model.predict(inputs).logits)
    print(NNRun.load(run.id, root=root))
    print("reloaded into a fresh instance: identical keyword-input predictions")


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        registered_encoder(root)
        wrapped_keyword_module(root)


if __name__ == "__main__":
    main()
