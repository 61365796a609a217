"""NNModel's eager inference: what its net is given, and what ``predict`` /
``predict_proba`` make of the logits.

Inputs are moved to the model's device (:func:`on_device`). ``predict`` /
``predict_proba`` take a tensor or an array (one forward per :data:`_CHUNK` rows), a
mapping of keyword inputs, a tuple of tensors, or a loader (any iterable of batches,
split by the model's batch adapter). A 1-D input as long as a row is refused before
any forward, and a forward that fails on mismatched dtypes is restated with what to
convert (:func:`dtype_hint`). The logits come from the model's ``_logits`` (which a
subclass may extend: ``PreprocessedNNModel`` standardizes raw rows there); the task
is asked first whether the default predict path may run, and decodes them or
numbers their rows.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import nn

from nnx._contracts.batch_adapters import BatchAdapter, ModelInputs
from nnx._foundation.modes import preserved_state
from nnx.params._loaders import refuse_dataset
from nnx.tasks.protocol import refuse_default_path

if TYPE_CHECKING:
    from nnx._engine.prediction import PredictionResult, PredictResult, ProbabilitySpec

__all__ = ["dtype_hint", "logits_of", "on_device", "predict_batches", "predict_classes",
           "predict_probabilities", "refuse_unbatched"]

_CHUNK = 4096  # rows per forward when predicting on one large tensor
# torch's wordings of "the input's dtype is not the weights'" (Linear, conv, and others).
_DTYPE_CLASH = re.compile(r"same dtype|expected scalar type|type \(.*\) should be the same")


_CAST = {torch.float32: "float()", torch.float64: "double()", torch.float16: "half()",
         torch.bfloat16: "bfloat16()"}


def on_device(value: Any, device: torch.device) -> Any:
    """``value`` on ``device``; a tensor already there is returned without a torch call."""
    if isinstance(value, torch.Tensor) and value.device != device:
        return value.to(device)
    return value


def predict_batches(data: Any, device: torch.device, batch_adapter: BatchAdapter,
                    split: Callable[[Any], tuple[ModelInputs, Any]]
                    ) -> Iterable[tuple[Sequence[Any], Any]]:
    """``(inputs, target)`` per forward of what ``predict`` was given (module docstring);
    ``split`` is the model's ``split_batch``, for a loader's batches."""
    if isinstance(data, np.ndarray):
        data = torch.from_numpy(data)
    if isinstance(data, torch.Tensor):
        for start in range(0, max(len(data), 1), _CHUNK):
            yield (data[start:start + _CHUNK].to(device),), None
    elif isinstance(data, Mapping):  # keyword inputs (a built-in net's, in order)
        args, kwargs = batch_adapter.predict_inputs(data)
        yield ModelInputs((on_device(x, device) for x in args),
                          {k: on_device(v, device) for k, v in kwargs.items()}), None
    elif isinstance(data, tuple) and all(isinstance(x, torch.Tensor) for x in data):
        yield tuple(x.to(device) for x in data), None
    else:  # a loader, or any iterable of batches
        for batch in data:
            yield split(batch)


def logits_of(model: Any, data: Any) -> torch.Tensor:
    """``model._logits(data)``: one eval-mode, no-grad forward per chunk or batch of what
    ``predict`` was given, in the model's inference precision, as float."""
    refuse_unbatched(data, model.net_params)  # before any mode or state is touched
    outputs = []
    with (preserved_state(model.net, mode="eval"), torch.no_grad(),
          model.inference_precision().autocast()):
        for inputs, _ in predict_batches(data, model.device, model.batch_adapter,
                                         model.split_batch):
            outputs.append(model.forward_raw(inputs).float())
    if not outputs:
        raise ValueError("predict: no input rows")
    return torch.cat(outputs)


def refuse_unbatched(data: Any, net_params: Any) -> None:
    """A 1-D input as long as a row is one sample without its batch axis; the net
    would read it as that many rows of one feature and report a width mismatch."""
    refuse_dataset("predict", data, "test_loader")
    width = getattr(net_params, "input_dim", None)
    if (isinstance(data, (torch.Tensor, np.ndarray)) and data.ndim == 1
            and isinstance(width, int) and width > 1 and data.shape[0] == width):
        raise ValueError(
            f"predict got one unbatched sample of {width} features (shape ({width},)); "
            f"the net takes a batch of rows (N, {width}): pass x.unsqueeze(0) (x[None] "
            "for an array) to predict one sample")


def dtype_hint(exc: RuntimeError, inputs: Sequence[Any], kwargs: Mapping[str, Any],
               net: nn.Module) -> str | None:
    """torch's dtype clash restated with what to change; None when it is something else.

    Runs only once the forward has failed, so a healthy batch pays nothing for it."""
    if not _DTYPE_CLASH.search(str(exc)):
        return None
    weight = next((p.dtype for p in net.parameters() if p.is_floating_point()), None)
    if weight is None:
        return None
    named = [(f"input {i}", x) for i, x in enumerate(inputs)] + list(kwargs.items())
    clashing = [(name, x.dtype) for name, x in named
                if isinstance(x, torch.Tensor) and x.dtype != weight and x.dtype != torch.bool]
    if not clashing:
        return None
    def short(dtype: torch.dtype) -> str:
        return str(dtype).removeprefix("torch.")

    found = ", ".join(f"{name} is {short(dtype)}" for name, dtype in clashing)
    method = _CAST.get(weight, f"to({weight})")
    what = "training batch's" if net.training else "batch's"
    hint = (f"the {what} inputs do not match the net: {found}, but the net's parameters are "
            f"{short(weight)}; convert the inputs with x.{method}")
    if clashing[0][1].is_floating_point:
        hint += f" (or the net with net.to({clashing[0][1]}))"
    return hint


def predict_classes(model: Any, data: Any) -> PredictResult:
    """``model.predict(data)``: raw logits and the task's decoded classes."""
    # On first use: a fit never predicts (issue 38).
    from nnx._engine.prediction import PredictResult, decode_on_axis, net_class_axis

    refuse_default_path(model.task_runtime.task, "predict")
    axis = net_class_axis(model.net)  # e.g. a TransformerNN's (batch, seq, vocab): -1
    logits = model._logits(data)
    return PredictResult(logits=logits,
                         classes=decode_on_axis(model.task_adapter.decode, logits, axis))


def predict_probabilities(model: Any, data: Any,
                          spec: ProbabilitySpec | None) -> PredictionResult:
    """``model.predict_proba(data, spec)``: probabilities under ``spec`` (or the declared
    task's) with the same logits, each row numbered by the task or by position."""
    # On first use: a fit never predicts (issue 38).
    from nnx._engine.prediction import (
        ProbabilitySpec,
        class_axis_in,
        net_class_axis,
        prediction_from_logits,
        warn_if_shuffled,
    )

    task = model.task_runtime.task
    refuse_default_path(task, "predict")  # a task's refusal comes first
    if spec is None:
        if model.params.task is None:
            raise ValueError("predict_proba needs a ProbabilitySpec when the model "
                             "declares no task")
        spec = ProbabilitySpec.for_task(model.params.task)
        axis = net_class_axis(model.net)
    else:
        axis = None  # a given spec names its own class axis
    logits = model._logits(data)
    if spec is not None and axis is not None:
        spec = dataclasses.replace(spec, class_axis=class_axis_in(logits, axis))
    ids = task.sample_ids(data, len(logits))  # the Task protocol's sample-id hook
    if ids is None:
        warn_if_shuffled(data)  # the ids below are iteration positions for a loader
        ids = np.arange(len(logits))
    return prediction_from_logits(logits, spec, sample_ids=ids)  # spec None: regression
