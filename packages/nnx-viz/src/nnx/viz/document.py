"""``netron_export``: the one file nnx.viz writes, the net as ONNX for Netron (spec §12).

The file is written by core's ONNX exporter (``nnx.extend.export_onnx``, the one behind
``NNModel.to_onnx``): the same refusals first (a net's ``refuse_onnx_export()``, a
keyword-input example, a missing ``onnx`` extra), the same atomic write, every
submodule's mode put back. Nothing else is written here, so a refusal leaves no file.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from nnx.extend import export_onnx
from nnx.viz.extras import netron
from nnx.viz.guard import untouched
from nnx.viz.inputs import device_of, network

__all__ = ["netron_export"]

_OWNER = "nnx.viz.netron_export"


def netron_export(model: object, path: str | os.PathLike[str], example_input: Any, *,
                  launch: bool = False, opset_version: int | None = None,
                  dynamic_batch: bool = True, input_names: Sequence[str] | None = None,
                  output_names: Sequence[str] | None = None) -> Path:
    """Write ``model``'s net traced on ``example_input`` to ``path`` as ONNX; the path.

    The export needs nnx-core's ``onnx`` extra (``pip install "nnx-viz[netron]"``
    brings it). ``launch=True`` then opens the file in Netron's browser viewer
    (``netron.start``), which needs the ``netron`` extra: checked before anything is
    exported. A net that refuses ONNX export (``refuse_onnx_export()``, nnx-graph's
    graph classifier) raises its own error before any file exists. Every submodule's
    mode and flags are put back, also on error (§13.2).
    """
    if not isinstance(launch, bool):
        raise TypeError(f"{_OWNER}: launch must be a bool; got {launch!r}")
    viewer = netron(_OWNER) if launch else None
    net = network(_OWNER, model)
    with untouched(net, mode="eval"):
        written = export_onnx(net, example_input, path, device=device_of(net),
                              opset_version=opset_version, dynamic_batch=dynamic_batch,
                              input_names=input_names, output_names=output_names,
                              owner=_OWNER)
    if viewer is not None:
        viewer.start(str(written))
    return written
