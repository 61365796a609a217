"""ONNX export of a model's net (spec §3.2, §13.2; docs/onnx.md).

Any module whose forward takes positional tensors and returns one tensor exports:
a built-in net, a registered factory's module, a wrapped runtime module. The graph
is traced from ``example_input`` with torch's ``torch.export``-based exporter
(``dynamo=True``, the one torch maintains; it needs ``onnxscript``, part of the
``onnx`` extra), in eval mode, with the batch axis dynamic unless told otherwise.

Every refusal (a net that declares it has no ONNX form, a mapping example, a forward
that returns no tensor, a missing extra, a bad name list) comes before anything is
written. A net refuses for itself with a ``refuse_onnx_export()`` method that raises
its own named error (nnx-graph's graph classifier: its forward reads a whole batch of
graphs, which no tensor-only graph stands for); it is asked first, before the example
is read, so whatever example is passed the refusal is the same. The file is serialized
in memory and written by the atomic writer, so a failed export leaves no
half-written file, and every submodule's own train / eval flag is put back even
when the export raises (the non-destructive contract, §13.2).
"""

from __future__ import annotations

import inspect
import os
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nnx._foundation.atomic import atomic_write_bytes
from nnx._foundation.extras import require_extra
from nnx._foundation.modes import preserved_state

__all__ = ["export_onnx"]

_OWNER = "NNModel.to_onnx"


def _inputs(example: Any, device: torch.device, owner: str) -> tuple[torch.Tensor, ...]:
    if isinstance(example, Mapping):
        raise ValueError(
            f"{owner} takes positional example inputs; got a mapping of keyword inputs "
            f"({sorted(map(str, example))}). ONNX export needs a forward that takes "
            f"positional tensors: wrap the module in one whose forward(*tensors) calls it "
            f"with keywords, and export NNModel(module=wrapper)")
    if isinstance(example, (torch.Tensor, np.ndarray)):
        example = (example,)
    if not isinstance(example, (tuple, list)) or not example:
        raise TypeError(f"{owner}: example_input must be a tensor or a non-empty tuple of "
                        f"tensors; got {type(example).__name__}")
    found = []
    for i, value in enumerate(example):
        if isinstance(value, np.ndarray):
            value = torch.from_numpy(value)
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"{owner}: example_input[{i}] must be a tensor; got "
                            f"{type(value).__name__}")
        found.append(value.to(device))
    return tuple(found)


def _names(label: str, names: Sequence[str] | None, count: int, default: list[str],
           owner: str) -> list[str]:
    if names is None:
        return default
    if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
        raise TypeError(f"{owner}: {label} must be a sequence of non-empty strings; got "
                        f"{names!r}")
    names = list(names)
    if len(names) != count or len(set(names)) != count:
        raise ValueError(f"{owner}: {label} must name each of the {count} tensor(s) once; "
                         f"got {names}")
    return names


def _batch_axes(net: nn.Module, inputs: tuple[torch.Tensor, ...]) -> tuple[Any, ...]:
    """torch.export's ``dynamic_shapes``: axis 0 of every input is the one batch axis.

    Its structure follows the forward's signature, where ``*args`` collects the
    remaining inputs into one tuple (a positional wrapper's ``forward(*tensors)``)."""
    batch = torch.export.Dim("batch")

    def axes(x: torch.Tensor) -> dict[int, Any] | None:
        return {0: batch} if x.dim() > 0 else None

    shapes: list[Any] = []
    rest = list(inputs)
    for param in inspect.signature(net.forward).parameters.values():
        if not rest:
            break
        if param.kind is param.VAR_POSITIONAL:
            shapes.append(tuple(axes(x) for x in rest))
            rest = []
        elif param.kind in (param.POSITIONAL_ONLY, param.POSITIONAL_OR_KEYWORD):
            shapes.append(axes(rest.pop(0)))
    return (*shapes, *(axes(x) for x in rest))  # more inputs than parameters: torch says so


def export_onnx(net: nn.Module, example: Any, path: str | os.PathLike[str], *,
                device: torch.device, opset_version: int | None = None,
                dynamic_batch: bool = True, input_names: Sequence[str] | None = None,
                output_names: Sequence[str] | None = None, owner: str = _OWNER) -> Path:
    """Write ``net`` traced on ``example`` to ``path`` as an ONNX model; the resolved path.

    ``owner`` is the call every message names: ``NNModel.to_onnx``, or an add-on's helper
    exporting a bare module through this one exporter (nnx-viz's ``netron_export``)."""
    refuse = getattr(net, "refuse_onnx_export", None)
    if callable(refuse):
        refuse()
    inputs = _inputs(example, device, owner)
    default_inputs = ["input"] if len(inputs) == 1 else [f"input_{i}" for i in range(len(inputs))]
    in_names = _names("input_names", input_names, len(inputs), default_inputs, owner)
    out_names = _names("output_names", output_names, 1, ["output"], owner)
    if not isinstance(dynamic_batch, bool):
        raise TypeError(f"{owner}: dynamic_batch must be a bool; got {dynamic_batch!r}")
    if opset_version is not None and (isinstance(opset_version, bool)
                                      or not isinstance(opset_version, int)
                                      or opset_version < 1):
        raise ValueError(f"{owner}: opset_version must be a positive integer or None; got "
                         f"{opset_version!r}")
    target = Path(os.fspath(path))
    if target.is_dir():
        raise IsADirectoryError(f"{owner}: {target} is a directory; name the .onnx file")
    if not target.parent.is_dir():
        raise FileNotFoundError(f"{owner}: the directory {target.parent} does not exist")
    for module in ("onnx", "onnxscript"):  # the exporter imports both
        require_extra(owner, module, "onnx")
    dynamic = _batch_axes(net, inputs) if dynamic_batch else None
    with preserved_state(net, mode="eval"):
        with torch.no_grad():
            probe = net(*inputs)
        if not isinstance(probe, torch.Tensor):
            raise TypeError(
                f"{owner} exports a module whose forward returns one tensor; "
                f"{type(net).__name__} returned {type(probe).__name__}: wrap it in a module "
                f"that returns the tensor to export")
        with warnings.catch_warnings():
            # Several inputs share the one batch axis on purpose; the exporter says so.
            warnings.filterwarnings("ignore", message=r"# The axis name: .* shares the same")
            program = torch.onnx.export(net, inputs, None, dynamo=True, input_names=in_names,
                                        output_names=out_names, opset_version=opset_version,
                                        dynamic_shapes=dynamic, external_data=False,
                                        verbose=False)
    if program is None:  # only the legacy exporter (dynamo=False) returns None
        raise RuntimeError(f"{owner}: torch.onnx.export returned no program")
    data = program.model_proto.SerializeToString()
    return atomic_write_bytes(target, data)
