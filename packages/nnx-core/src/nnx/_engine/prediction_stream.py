"""Streaming prediction (spec §21): ``NNModel.iter_predict`` one batch at a time.

The eager ``predict()`` / ``predict_proba()`` hold every batch's outputs until the
loader ends. A :class:`PredictionStream` yields each batch's result as soon as its
forward pass is done and keeps nothing after yielding it, so its own memory is the
batch in flight, whatever the dataset's size. Each batch is decoded by the same
functions the eager calls use, so the concatenated stream is the eager result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from nnx._engine.prediction import (
    PredictionResult,
    PredictResult,
    ProbabilitySpec,
    _as_sample_ids,
    class_axis_in,
    decode_on_axis,
    net_class_axis,
    prediction_from_logits,
    warn_if_shuffled,
)
from nnx._foundation.modes import preserved_state
from nnx.params._loaders import check_loader
from nnx.tasks.protocol import refuse_default_path

__all__ = ["PredictionBatch", "PredictionStream", "StreamClosedError",
           "concatenate_predictions", "open_prediction_stream"]


class StreamClosedError(RuntimeError):
    """A prediction stream was iterated or entered again after it was used or closed."""


@dataclass(frozen=True, slots=True)
class PredictionBatch:
    """One batch of ``predict()``: raw logits, decoded classes, and the rows' ids."""

    logits: torch.Tensor
    classes: torch.Tensor
    sample_ids: npt.NDArray[np.int64]


def open_prediction_stream(model: Any, loader: Any, spec: ProbabilitySpec | None,
                           rich: bool) -> PredictionStream:
    """Check everything the eager calls check up front, then a stream over ``loader``."""
    if isinstance(loader, Mapping) or (
            isinstance(loader, tuple) and loader and
            all(isinstance(x, torch.Tensor) for x in loader)):
        raise TypeError("iter_predict takes a DataLoader or another iterable of batches; "
                        "in-memory inputs stay with predict() / predict_proba()")
    check_loader("iter_predict", loader, training=False)  # tensors, arrays, datasets
    if spec is not None and not isinstance(spec, ProbabilitySpec):
        raise TypeError(f"spec must be a ProbabilitySpec or None; got {type(spec).__name__}")
    if not isinstance(rich, bool):
        raise TypeError(f"rich must be a bool; got {rich!r}")
    refuse_default_path(model.task_runtime.task, "predict")  # as the eager calls
    axis = net_class_axis(model.net)
    full: ProbabilitySpec | None = spec
    if spec is None and rich:
        if model.params.task is None:
            raise ValueError("iter_predict(rich=True) needs a ProbabilitySpec when the model "
                             "declares no task")
        full = ProbabilitySpec.for_task(model.params.task)
    return PredictionStream(model, loader, spec=full, rich=rich or spec is not None,
                            spec_axis=axis if spec is None else None)


class PredictionStream:
    """The batches of one pass over a loader; use it in a ``with`` block, once.

    Iterating it again (after it ended, was closed, or a ``break``) or entering a
    closed one raises :class:`StreamClosedError`. ``close()`` drops the references
    to the model and the loader's iterator; the loader itself is never closed.
    """

    def __init__(self, model: Any, loader: Any, *, spec: ProbabilitySpec | None, rich: bool,
                 spec_axis: int | None) -> None:
        self._model: Any = model
        self._loader: Any = loader
        self._spec, self._rich, self._spec_axis = spec, rich, spec_axis
        self._gen: Generator[Any, None, None] | None = None
        self._started = False
        self._closed = False

    # -- the context and the iterator ----------------------------------------------
    def __enter__(self) -> PredictionStream:
        if self._closed:
            raise StreamClosedError("this prediction stream is closed; ask iter_predict() "
                                    "for a new one")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> PredictionStream:
        if self._started:
            raise StreamClosedError(
                "this prediction stream was already iterated (consumed, closed or left "
                "after a break); ask iter_predict() for a new one")
        self._started = True
        if not self._closed:
            self._gen = self._batches()
        return self

    def __next__(self) -> PredictionBatch | PredictionResult:
        if not self._started:
            self.__iter__()  # next(stream) on a fresh stream starts it, as a generator does
        gen = self._gen
        if gen is None:  # closed: exhausted, like a closed generator
            raise StopIteration
        try:
            item: PredictionBatch | PredictionResult = next(gen)
            return item
        except BaseException:
            self.close()  # the end, or an error inside the stream, closes it
            raise

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Finalize the generator and drop the model and the loader's iterator."""
        gen, self._gen = self._gen, None
        self._closed = True
        self._started = True
        self._model = self._loader = None
        if gen is not None:
            gen.close()

    # -- one batch at a time ---------------------------------------------------------
    def _batches(self) -> Generator[PredictionBatch | PredictionResult, None, None]:
        model, loader = self._model, self._loader
        runtime = model.task_runtime
        axis = net_class_axis(model.net)
        offset = 0
        warned = False
        for batch in loader:
            inputs, _ = model.split_batch(batch)
            # Eval mode only around the forward: the net is back in its own mode before
            # the batch is yielded (or the error raised), so a consumer may train it.
            with (preserved_state(model.net, mode="eval"), torch.no_grad(),
                  model.inference_precision().autocast()):
                logits = model.forward_raw(inputs).float()
            rows = int(logits.shape[0])
            ids = runtime.task.sample_ids(batch, rows)  # a batch that carries its rows' ids
            if ids is None:
                if not warned:  # iteration positions: warn once over a shuffling loader
                    warn_if_shuffled(loader, caller="iter_predict", stacklevel=4)
                    warned = True
                ids = np.arange(offset, offset + rows)
            offset += rows
            yield self._result(logits, ids, runtime, axis)
            del logits, inputs, batch  # hold nothing while the consumer runs

    def _result(self, logits: torch.Tensor, ids: Any, runtime: Any,
                axis: int | None) -> PredictionBatch | PredictionResult:
        if not self._rich:
            classes = decode_on_axis(runtime.batch_ops.decode, logits, axis)
            return PredictionBatch(logits, classes, _as_sample_ids(ids, int(logits.shape[0])))
        spec = self._spec
        if spec is not None and self._spec_axis is not None:
            spec = dataclasses.replace(spec, class_axis=class_axis_in(logits, self._spec_axis))
        return prediction_from_logits(logits, spec, sample_ids=ids)


def concatenate_predictions(batches: Sequence[PredictionBatch | PredictionResult]
                            ) -> PredictResult | PredictionResult:
    """The batches of one stream joined: ``predict()``'s or ``predict_proba()``'s result."""
    items = list(batches)
    if not items:
        raise ValueError("concatenate_predictions: no batches (an empty stream has no result)")
    plain = [b for b in items if isinstance(b, PredictionBatch)]
    if len(plain) == len(items):
        return PredictResult(logits=torch.cat([b.logits for b in plain]),
                             classes=torch.cat([b.classes for b in plain]))
    rich = [b for b in items if isinstance(b, PredictionResult)]
    if len(rich) != len(items):
        raise TypeError("concatenate_predictions joins the batches of one stream: all "
                        "PredictionBatch or all PredictionResult")
    specs = {b.spec for b in rich}
    if len(specs) != 1:
        raise ValueError("concatenate_predictions: the batches were decoded under different "
                         "specs")
    # Decoded again from the joined logits: element-wise kernels (sigmoid) may round the
    # last bit differently by tensor length, and the joined result must be the eager one.
    return prediction_from_logits(torch.cat([b.logits for b in rich]), rich[0].spec,
                                  sample_ids=np.concatenate([b.sample_ids for b in rich]))
