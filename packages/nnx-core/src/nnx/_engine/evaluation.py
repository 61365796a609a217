"""The whole-loader validation record (spec §6.4, §21), shared by ``NNModel.evaluate``
and :func:`streaming_eval_step`.

The record is built from counts and sums: the task accumulator's running statistics,
the declared metrics' accumulators, and the loss as Σ numerators / Σ denominators.
Only ``extra_metrics`` (callables on the full arrays) hold every target, so the
streaming step refuses them and, with them, nothing grows with the loader.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from nnx._foundation.modes import preserved_state
from nnx._foundation.records import NNEvaluationDataPoint
from nnx.metrics import MetricSpec, resolve_metric

__all__ = ["evaluate_loader", "is_streaming_step", "preflight_eval_step", "run_eval_step",
           "streaming_eval_step",
           "streaming_step_problems"]


def evaluate_loader(model: Any, loader: Any, metrics: Sequence[Any] = (),
                    extra_metrics: Mapping[str, Callable[..., Any]] | None = None, *,
                    allow_empty: bool = False) -> NNEvaluationDataPoint:
    """The loader's record: every valid sample's loss and metrics (eval mode, no grad)."""
    adapter = model.task_adapter
    acc = adapter.accumulator(metrics=tuple(metrics))
    truths: list[np.ndarray] = []
    preds: list[np.ndarray] = []
    summed = adapter.reduction(model.loss_fn) == "sum"
    total, batches = 0.0, 0
    with (preserved_state(model.net, mode="eval"), torch.no_grad(),
          model.inference_precision().autocast()):
        for batch in loader:
            inputs, target = model.split_batch(batch)
            if target is None:
                raise ValueError("evaluate needs (X, Y) batches; got no target")
            output = model.forward_raw(inputs).float()
            adapter.validate(output, target)
            num, den = adapter.loss_parts(output, target, model.loss_fn)
            numerator = float(num)
            total += numerator
            batches += 1
            acc.update(output, target, loss_numerator=numerator,
                       loss_denominator=float(den), validate=False)
            if extra_metrics:
                y_true, y_pred = adapter.extra_metric_inputs(output, target)
                truths.append(y_true)
                preds.append(y_pred)
    if batches == 0 and not allow_empty:
        raise ValueError("evaluate: the loader yielded no batch, so there is nothing to "
                         "score (an empty validation split?)")
    record: NNEvaluationDataPoint = acc.result()
    if summed and batches:  # the loader's total, whatever the batch size
        record = NNEvaluationDataPoint(**{**_fields(record), "loss": total})
    if extra_metrics and truths:
        y_true, y_pred = np.concatenate(truths), np.concatenate(preds)
        extra = {**record.extra, **{name: float(fn(y_true, y_pred))
                                    for name, fn in extra_metrics.items()}}
        record = NNEvaluationDataPoint(**{**_fields(record), "extra": extra})
    return record


def _fields(record: NNEvaluationDataPoint) -> dict[str, Any]:
    return {name: getattr(record, name) for name in (
        "loss", "error", "accuracy", "f1", "recall", "precision", "metrics", "kind", "count",
        "status")}


def streaming_step_problems(extra_metrics: Any, metrics: Sequence[Any]
                            ) -> list[tuple[str, str]]:
    """Every declaration streaming_eval_step cannot serve, as ``(path, message)`` pairs
    (``train.extra_metrics``, ``train.metrics[i]``); empty when it can run."""
    # On first use: only the opt-in streaming step asks (issue 38).
    from nnx._engine.streaming_metrics import accumulator_is_bounded

    problems: list[tuple[str, str]] = []
    if extra_metrics:
        problems.append(("train.extra_metrics", (
            "streaming_eval_step refuses extra_metrics (callables on the full arrays hold "
            f"every target): drop {sorted(extra_metrics)} or use the default validation")))
    for i, spec in enumerate(metrics):
        if isinstance(spec, MetricSpec):
            registration = resolve_metric(spec)
            if not accumulator_is_bounded(registration.factory(spec.config)):
                problems.append((f"train.metrics[{i}]", (
                    f"streaming_eval_step refuses train.metrics[{i}] ({spec.label!r}): it "
                    "stores every score (no merge(), or stores_scores = True); use the "
                    "default validation")))
    return problems


def _refuse(extra_metrics: Any, metrics: Sequence[Any]) -> None:
    problems = streaming_step_problems(extra_metrics, metrics)
    if problems:
        from nnx._engine.streaming_metrics import UnboundedMetricError  # on first use

        raise UnboundedMetricError("; ".join(message for _, message in problems))


def streaming_eval_step(ctx: Any) -> NNEvaluationDataPoint:
    """An opt-in ``eval_step_fn``: the default validation record, bounded in memory.

    Refuses ``extra_metrics`` and a stored-score metric before reading a batch
    (``NNModel.train`` checks both before reserving the run). An empty validation
    loader gives the empty record (count 0) instead of evaluate()'s error.
    """
    _refuse(ctx.extra_metrics, ctx.metrics)
    return evaluate_loader(ctx.model, ctx.val_loader, ctx.metrics, allow_empty=True)


def preflight_eval_step(eval_fn: Any, extra_metrics: Any, metrics: Sequence[Any]) -> None:
    """Refuse, before any run is reserved, what the streaming step would refuse at its
    first call: only for streaming_eval_step itself or a functools.partial of it (a step
    that wraps it is a step of its own)."""
    if is_streaming_step(eval_fn):
        _refuse(extra_metrics, metrics)


def is_streaming_step(eval_fn: Any) -> bool:
    """``eval_fn`` is streaming_eval_step itself or a functools.partial of it."""
    fn = eval_fn
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn is streaming_eval_step


def run_eval_step(eval_fn: Callable[[Any], NNEvaluationDataPoint],
                  ctx: Any) -> NNEvaluationDataPoint:
    """One validation through the caller's ``eval_step_fn``: the net in eval mode under
    no_grad (its mode restored after), and the record it must return."""
    with preserved_state(ctx.model.net, mode="eval"), torch.no_grad():
        edp = eval_fn(ctx)
    if not isinstance(edp, NNEvaluationDataPoint):
        raise TypeError("eval_step_fn must return an NNEvaluationDataPoint")
    return edp
