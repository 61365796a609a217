"""Shared helpers of tests/bundles: a tiny categorical run, a stand-in calibrator and a
manifest-consistent rewrite of one bundle file (so a test reaches the check it means)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from nnx import EarlyStopping, NNModel, NNParams, NNTrainParams
from nnx._foundation.hashing import sha256_hex
from nnx.bundles import export_bundle


def batches() -> list[tuple[torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(0)
    return [(torch.randn(6, 3, generator=generator), torch.randint(0, 3, (6,), generator=generator))
            for _ in range(2)]


def model(seed: int = 1) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=3, output_dim=3, hidden_dims=(8,)))


def params(n_epochs: int, data: Any = None, **kwargs: Any) -> NNTrainParams:
    data = batches() if data is None else data
    return NNTrainParams(n_epochs=n_epochs, train_loader=data, val_loader=data, seed=0, **kwargs)


def train(root: Path, n_epochs: int = 2, **kwargs: Any) -> Any:
    """A run of the tiny classifier (with EarlyStopping, a component) under ``root``."""
    return model().train(params(n_epochs), callbacks=[EarlyStopping(patience=5)],
                         verbose=False, root=root, **kwargs)


def trained_bundle(base: Path) -> tuple[Path, Any]:
    """``base/bundle``, exported from LAST of a :func:`train` run under ``base/runs``;
    returns the bundle's path and the run."""
    run = train(base / "runs")
    export_bundle(run.id, base / "bundle", root=base / "runs")
    return base / "bundle", run


class StandInCalibrator:
    """The smallest object with the bundle's calibrator protocol: a temperature bound to
    a class count, labels and a model id, in a format of its own (acme.temperature/1:
    nnx.calibration/1 is nnx-decisions', whose installed reader would claim it)."""

    def __init__(self, labels: list[Any], model_id: str | None, temperature: float = 1.5,
                 num_classes: int | None = None) -> None:
        self.labels = list(labels)
        self.num_classes = len(labels) if num_classes is None else num_classes
        self.model_id = model_id
        self.temperature = temperature

    def to_json(self) -> dict[str, Any]:
        return {"format": "acme.temperature/1", "kind": "temperature", "labels": self.labels,
                "model_id": self.model_id, "temperature": self.temperature}

    @classmethod
    def from_record(cls, record: Any) -> StandInCalibrator:
        return cls(list(record["labels"]), record["model_id"], record["temperature"])


def live_generation(bundle: Path) -> Path:
    manifest = json.loads((bundle / "bundle.json").read_text())
    return bundle / f"g-{manifest['generation']}"


def rewrite(bundle: Path, name: str, data: bytes) -> None:
    """Replace payload ``name`` of the live generation with ``data`` and vouch for it in
    the manifest (hash and size), so only the check the test aims at can refuse it."""
    manifest = json.loads((bundle / "bundle.json").read_text())
    rel = f"g-{manifest['generation']}/{name}"
    (bundle / rel).write_bytes(data)
    manifest["files"][rel] = {"sha256": sha256_hex(data), "size": len(data)}
    (bundle / "bundle.json").write_text(json.dumps(manifest))


def state(bundle: Path) -> dict[str, Any]:
    return json.loads((live_generation(bundle) / "state.json").read_text())


def rewrite_state(bundle: Path, value: dict[str, Any]) -> None:
    rewrite(bundle, "state.json", json.dumps(value).encode())
