"""Legacy QAT-converted checkpoints (spec §16): recognised, refused with a targeted error,
and migrated to a checkpoint that records the ``nnx.qat`` recipe.

A legacy converted checkpoint holds torchao's removed ``Int8DynActInt4WeightLinear``
layout for each converted Linear: ``<layer>.weight`` (int8 values in the int4 range,
out x in), ``<layer>.scales`` and ``<layer>.zeros`` (out x in/groupsize), and records no
recipe, so ``NNModel.from_checkpoint`` cannot rebuild it. :func:`explain_legacy_qat` (the
``nnx.qat`` op's ``explain_weights``) turns the load's names-and-shapes error into a
TransformCompatibilityError naming the layers, the groupsize and
:func:`migrate_legacy_qat`, which dequantizes those weights, converts them with the
current 8da4w config (groupsize read from the shapes) and writes a checkpoint that
records the recipe.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nnx import NNCheckpoint, NNModel, TransformCompatibilityError, TransformRecipe
from nnx.quantize.errors import QuantizeError
from nnx.quantize.qat_base import QAT_OP, QAT_VERSION, prepare_qat

__all__ = ["explain_legacy_qat", "legacy_qat_layers", "migrate_legacy_qat"]

def _layers(names: Sequence[str]) -> list[str]:
    present = set(names)
    return sorted(n[:-len(".scales")] for n in present
                  if n.endswith(".scales") and n[:-len(".scales")] + ".zeros" in present)


def legacy_qat_layers(state_dict: Mapping[str, Any]) -> list[str]:
    """The layers of ``state_dict`` in the legacy converted layout (weight, scales, zeros)."""
    return [p for p in _layers(list(state_dict)) if f"{p}.weight" in state_dict]


def explain_legacy_qat(missing: Sequence[str], unexpected: Mapping[str, tuple[int, ...]]
                       ) -> str | None:
    """Raise the migration error when the checkpoint's extra names are legacy QAT
    ``scales`` / ``zeros`` buffers; None otherwise (another op may recognise them)."""
    layers = _layers(list(unexpected))
    if not layers:
        return None
    raise TransformCompatibilityError(
        f"the checkpoint is a legacy QAT-converted checkpoint: {layers} hold torchao's "
        f"removed Int8DynActInt4WeightLinear layout (weight, scales, zeros) and it records "
        f"no nnx.qat recipe (qat_config, groupsize), so NNModel.from_checkpoint cannot "
        f"rebuild its quantized net. Migrate it once with nnx.quantize.migrate_legacy_qat("
        f"path, dest), which writes a checkpoint recording the recipe, then load dest with "
        f"NNModel.from_checkpoint. Nothing was loaded")


def migrate_legacy_qat(source: NNCheckpoint | str | os.PathLike[str],
                       dest: str | os.PathLike[str]) -> NNCheckpoint:
    """Write ``dest``: ``source`` (a legacy converted checkpoint) with each legacy layer
    dequantized and converted again by the ``nnx.qat@v1`` op (8da4w, the groupsize its
    shapes give), the recipe recorded; weights-only, so it reloads for inference.
    QuantizeError, before anything is written, for a checkpoint with no legacy layer,
    one already recording the recipe, or layers whose groupsizes differ."""
    ckpt = source if isinstance(source, NNCheckpoint) else NNCheckpoint.from_file(source)
    layers = legacy_qat_layers(ckpt.state_dict)
    if any(isinstance(t, Mapping) and t.get("op") == QAT_OP for t in ckpt.transforms):
        raise QuantizeError("migrate_legacy_qat: the checkpoint already records the "
                            "nnx.qat recipe; load it with NNModel.from_checkpoint")
    if not layers:
        raise QuantizeError("migrate_legacy_qat: the checkpoint holds no legacy QAT layer "
                            "(weight, scales, zeros)")
    weights = dict(ckpt.state_dict)
    sizes = set()
    for layer in layers:
        q = weights[f"{layer}.weight"]
        scales, zeros = weights.pop(f"{layer}.scales"), weights.pop(f"{layer}.zeros")
        if scales.shape != zeros.shape or q.shape[1] % scales.shape[1]:
            raise QuantizeError(f"migrate_legacy_qat: {layer}'s scales {tuple(scales.shape)} "
                                f"do not group its weight {tuple(q.shape)}")
        groupsize = q.shape[1] // scales.shape[1]
        sizes.add(groupsize)
        # the legacy dequantization: (q - zero) * scale, per group of input features
        weights[f"{layer}.weight"] = ((q.float() - zeros.float().repeat_interleave(
            groupsize, dim=1)) * scales.float().repeat_interleave(groupsize, dim=1))
    if len(sizes) != 1:
        raise QuantizeError(f"migrate_legacy_qat: the layers' groupsizes differ "
                            f"({sorted(sizes)}); one nnx.qat recipe has one groupsize")
    (groupsize,) = sizes
    model = NNModel.from_checkpoint(dataclasses.replace(ckpt, state_dict=weights, path=None))
    prepare_qat(model.net, groupsize, layers)
    model.apply_transform(TransformRecipe(QAT_OP, QAT_VERSION, {
        "targets": layers, "qat_config": "8da4w", "groupsize": groupsize}))
    migrated = dataclasses.replace(
        ckpt, state_dict=model.net.state_dict(),
        transforms=tuple(dict(r.state()) for r in model.transforms), path=None)
    migrated.save(Path(dest))
    return NNCheckpoint.from_file(dest)

