"""Rebuilding an NNModel from saved weights: a checkpoint's, or a pretrained directory's.

The net is rebuilt from the recorded configuration (a built-in net's params, a
registered factory's ModelSpec, or a runtime module handed in again), the transform
recipes replayed, and the result compared with the saved parameter names and shapes
before any weight is loaded (spec §4.2, §13). ``cls`` is the model class to build
(NNModel or a subclass); ``NNModel.from_checkpoint`` and ``NNModel._rebuild`` (which
``nnx._surface.hub`` also calls) are the entry points.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from nnx._contracts.batch_adapters import BatchAdapter
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.flattened_tensor import FlattenedTensor, restore_flattened
from nnx._persistence.read_errors import BUILD_FAILURES, unbuildable
from nnx.enums.nets import Nets
from nnx.models.construct import check_checkpoint_module, check_rebuild_fits
from nnx.models.topology import WeightsMismatchError, check_weights_fit
from nnx.params.descriptors import ModelSpec
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.transforms import TransformRecipe, checkpoint_recipes, refuse_runtime, replay_transforms
from nnx.transforms.live import unrecorded_weights_error

__all__ = ["load_checkpoint_model", "rebuild_model"]


def load_checkpoint_model(cls: Any, checkpoint: NNCheckpoint | str | os.PathLike[str],
                          map_location: Any, *, module: nn.Module | None,
                          batch_adapter: BatchAdapter | None, task: Any) -> Any:
    """``cls.from_checkpoint``: the model ``checkpoint`` was written from, weights loaded."""
    if not isinstance(checkpoint, NNCheckpoint):
        checkpoint = NNCheckpoint.from_file(checkpoint, map_location=map_location)
    recipes = checkpoint_recipes(checkpoint.transforms)  # every one resolved up front
    params = NNModelParams.from_state(checkpoint.model)
    if recipes:
        refuse_runtime(params.net, "NNModel.from_checkpoint")
    check_checkpoint_module(params.net, module, checkpoint.state_dict)
    what = (f"checkpoint {checkpoint.path.as_posix()}" if checkpoint.path is not None
            else f"checkpoint {checkpoint.tag!r} of run {checkpoint.run_id}")

    def replay(net: nn.Module) -> object:
        return replay_transforms(net, recipes, base=params.net)

    try:
        model = cls._rebuild(checkpoint.state_dict, checkpoint.net, params, recipes, replay,
                             what, module=module, batch_adapter=batch_adapter, task=task)
    except WeightsMismatchError as exc:
        # No recorded recipe rebuilds what the weights hold: a run of a net changed in
        # place, written before such changes were recorded. Name the recipe if a
        # registered op recognises the saved modules.
        unrecorded = None if recipes else unrecorded_weights_error(
            what, exc.missing,
            {k: tuple(checkpoint.state_dict[k].shape) for k in exc.unexpected})
        if unrecorded is None:
            raise
        raise unrecorded from None
    except BUILD_FAILURES as exc:  # recorded sizes torch cannot build (hidden_dims 2**62)
        raise unbuildable(checkpoint.path, what, exc) from exc
    weights: Mapping[str, Any] = checkpoint.state_dict
    if any(isinstance(v, FlattenedTensor) for v in weights.values()):
        # A bundle's quantized weights: rebuilt as the subclasses the replayed recipe made.
        weights = restore_flattened(weights, model.net.state_dict(), what)
    model.net.load_state_dict(weights)
    return model


def rebuild_model(cls: Any, state_dict: Mapping[str, torch.Tensor],
                  net_state: Mapping[str, Any] | None, params: NNModelParams,
                  recipes: tuple[TransformRecipe, ...], replay: Callable[[nn.Module], object],
                  what: str, *, module: nn.Module | None, batch_adapter: BatchAdapter | None,
                  task: Any, **init: Any) -> Any:
    """``cls._rebuild``: the model saved weights describe, nothing loaded yet."""
    if isinstance(params.net, ModelSpec):  # its recorded config, checked on meta first
        check_rebuild_fits(None, params, state_dict, f"{what} ({params.net.label})", replay)
    if not isinstance(params.net, Nets):
        model = cls(params=params, module=module, batch_adapter=batch_adapter, task=task,
                    **init)
        model.transforms = replay_transforms(model.net, recipes, base=model.params.net)
        check_weights_fit(model.net, state_dict, f"{what} ({params.net.label})")
    else:
        if net_state is None:
            raise ValueError(f"{what} holds no net params; it cannot be rebuilt")
        net_params = NNParams.resolve_from_state(net_state, params.net)
        check_rebuild_fits(net_params, params, state_dict, what, replay)
        model = cls(net_params=net_params, params=params, batch_adapter=batch_adapter,
                    task=task, **init)
        model.transforms = replay_transforms(model.net, recipes, base=model.params.net)
    return model
