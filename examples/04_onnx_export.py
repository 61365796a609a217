"""Export a trained model to ONNX and run it in onnxruntime (spec §3.2, docs/onnx.md).

Needs the ``onnx`` extra: ``pip install "nnx-core[onnx]"`` (onnx, onnxruntime and
onnxscript, which torch's exporter uses).

* The main flow trains a tiny ConvNN on synthetic 8x8 images, exports it with
  ``model.to_onnx(path, example_input)`` and checks that onnxruntime's outputs match
  ``model.predict`` for a batch size the example input did not have (the batch axis
  is dynamic).
* :func:`registered_module_variant` exports a registered-factory module with two
  positional inputs, and shows that a keyword-input module is exported through a
  small positional wrapper (a mapping example is refused).

Everything is written to a temporary directory.

    uv run python examples/04_onnx_export.py
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import torch
from torch import nn

from nnx import (
    Devices,
    KeywordInputs,
    ModelSpec,
    Nets,
    NNConvParams,
    NNDataset,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTrainParams,
    register_model_factory,
)


def images() -> NNDataset:
    """Bright-left vs bright-right 8x8 images: two classes a tiny ConvNN learns at once."""
    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 2, (96,), generator=g)
    x = torch.randn(96, 1, 8, 8, generator=g) * 0.3
    x[y == 0, :, :, :4] += 1.0
    x[y == 1, :, :, 4:] += 1.0
    return NNDataset(x, y, val_proportion=0.25, batch_sizes=(16, None, None), seed=1)


def onnx_outputs(path: Path, feeds: Mapping[str, torch.Tensor]) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return session.run(None, {name: x.numpy() for name, x in feeds.items()})[0]


class Scorer(nn.Module):
    """Two positional inputs (features, a context vector) -> one score per class."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.features = nn.Sequential(nn.Linear(4, width), nn.GELU(), nn.Linear(width, 3))
        self.gate = nn.Linear(2, 3)

    def forward(self, x: torch.Tensor, context: torch.Tensor) -> torch.Tensor:
        return self.features(x) * torch.sigmoid(self.gate(context))


def scorer_factory(config: Mapping[str, Any]) -> nn.Module:
    return Scorer(**config)


class KeywordScorer(nn.Module):
    """A keyword-input module (``forward(*, features)``), as a tokenizer-fed model is."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 3)

    def forward(self, *, features: torch.Tensor) -> torch.Tensor:
        return self.head(features)


class Positional(nn.Module):
    """The wrapper ONNX export needs: positional tensors in, the keyword call inside."""

    def __init__(self, inner: nn.Module, names: tuple[str, ...]) -> None:
        super().__init__()
        self.inner, self.names = inner, names

    def forward(self, *tensors: torch.Tensor) -> torch.Tensor:
        return self.inner(**dict(zip(self.names, tensors, strict=True)))


def registered_module_variant(directory: str | None = None) -> Path:
    """Export a registered-factory module and check it in onnxruntime; returns the file."""
    out = Path(directory or tempfile.mkdtemp(prefix="nnx-onnx-"))
    register_model_factory("example.scorer", 1, scorer_factory)
    spec = ModelSpec("example.scorer", 1, {"width": 8}, seed=0)
    model = NNModel(params=NNModelParams(net=spec, device=Devices.CPU))
    path = model.to_onnx(out / "scorer.onnx", (torch.randn(2, 4), torch.randn(2, 2)),
                         input_names=["x", "context"], output_names=["scores"])
    x, context = torch.randn(5, 4), torch.randn(5, 2)
    expected = model.predict((x, context)).logits.numpy()
    got = onnx_outputs(path, {"x": x, "context": context})
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    print(f"registered {spec.label}: {path.name} matches torch "
          f"(max |diff| {np.abs(got - expected).max():.1e})")

    keyword = NNModel(module=KeywordScorer(), batch_adapter=KeywordInputs(("features",)))
    try:
        keyword.to_onnx(out / "keyword.onnx", {"features": torch.randn(2, 4)})
    except ValueError as exc:
        print(f"a mapping example is refused: {str(exc)[:72]}...")
    else:
        raise AssertionError("a mapping example was exported")
    assert not (out / "keyword.onnx").exists()  # refused before anything was written
    wrapped = NNModel(module=Positional(keyword.net, ("features",)))
    wrapped_path = wrapped.to_onnx(out / "keyword.onnx", torch.randn(2, 4))
    features = torch.randn(3, 4)
    np.testing.assert_allclose(onnx_outputs(wrapped_path, {"input": features}),
                               keyword.predict({"features": features}).logits.numpy(),
                               rtol=1e-5, atol=1e-5)
    print("the keyword-input module exports through its positional wrapper")
    return path


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="nnx-onnx-") as tmp:
        torch.manual_seed(0)
        net_params = NNConvParams(input_dim=64, output_dim=2, conv_channels=(4,),
                                  in_channels=1)
        model = NNModel(net_params=net_params,
                        params=NNModelParams(net=Nets.CONV, device=Devices.CPU))
        data = images()
        optim = NNOptimParams.builder().adam(max_lr=1e-2).build()
        model.train(NNTrainParams(n_epochs=2, train_loader=data.train_loader,
                                  val_loader=data.val_loader, optim=optim, seed=0),
                    verbose=False, root=Path(tmp) / "runs")

        path = model.to_onnx(Path(tmp) / "conv.onnx", torch.randn(2, 1, 8, 8))
        assert model.net.training  # the export put the net back in its own mode
        batch = torch.randn(7, 1, 8, 8)  # another batch size: the batch axis is dynamic
        got = onnx_outputs(path, {"input": batch})
        expected = model.predict(batch).logits.numpy()
        np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
        print(f"ConvNN: {path.name} ({path.stat().st_size} bytes) matches torch on a batch "
              f"of 7 (max |diff| {np.abs(got - expected).max():.1e})")
        registered_module_variant(tmp)


if __name__ == "__main__":
    main()
