"""NNModel: a built-in net with its loss, device, precision and task, and what it can do."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from nnx.checkpoint import NNCheckpoint
from nnx.enums.precision import Precision
from nnx.modes import preserved_state
from nnx.params.model import NNModelParams
from nnx.params.net import NNParams
from nnx.params.train import NNTrainParams
from nnx.precision import ResolvedPrecision, resolve_precision
from nnx.prediction import (
    PredictionResult,
    PredictResult,
    ProbabilitySpec,
    prediction_from_logits,
)
from nnx.records import NNEvaluationDataPoint
from nnx.run import DEFAULT_ROOT, NNRun
from nnx.tasks.adapters import TaskAdapter, task_adapter

__all__ = ["NNModel"]

_CHUNK = 4096  # rows per forward when predicting on one large tensor


class NNModel:
    """A model: ``NNModel(net_params=NNParams(...), params=NNModelParams(...))``.

    ``net`` is a plain ``torch.nn.Module`` (built-in nets return raw logits);
    ``train`` runs the supervised loop and returns the :class:`NNRun`.
    """

    def __init__(self, net_params: NNParams | None = None,
                 params: NNModelParams | None = None) -> None:
        params = NNModelParams() if params is None else params
        if not isinstance(params, NNModelParams):
            raise TypeError(f"params must be an NNModelParams; got {type(params).__name__}")
        if net_params is None:
            raise ValueError(f"Nets.{params.net.name} needs net_params "
                             f"({params.net.params_class.__name__})")
        if params.task is not None and params.task.num_outputs != net_params.output_dim:
            raise ValueError(
                f"the {params.task.kind} task declares {params.task.num_outputs} outputs but "
                f"net_params.output_dim is {net_params.output_dim}")
        self.params = params
        self.net_params = net_params
        self.device = params.device()
        self.net: nn.Module = params.net(net_params).to(self.device)
        self.loss_fn: nn.Module = params.loss().to(self.device)
        self._adapter = task_adapter(params.task, self.loss_fn)
        self._adapter_loss = self.loss_fn

    @property
    def task_adapter(self) -> TaskAdapter:
        """The task's adapter for the live ``loss_fn``.

        The loss object's class weights, ``ignore_index`` and ``reduction`` stay
        authoritative (spec §3.1, §6.3): assigning another loss to ``loss_fn``
        rebuilds the adapter for it, checking that it suits the task.
        """
        if self._adapter_loss is not self.loss_fn:
            self._adapter = task_adapter(self.params.task, self.loss_fn)
            self._adapter_loss = self.loss_fn
        return self._adapter

    # -- batches ----------------------------------------------------------------------
    def split_batch(self, batch: Any) -> tuple[tuple[torch.Tensor, ...], torch.Tensor | None]:
        """``((inputs...), target)`` on the model's device, through the net's unpack_batch."""
        inputs, target = self.net.unpack_batch(batch)  # type: ignore[operator]
        moved = tuple(_to(x, self.device) for x in inputs)
        return moved, None if target is None else _to(target, self.device)

    def forward_raw(self, inputs: Sequence[torch.Tensor]) -> torch.Tensor:
        output: torch.Tensor = self.net(*inputs)
        return output

    def inference_precision(self) -> ResolvedPrecision:
        """Inference runs in an explicit policy only; the legacy flag never governs it."""
        if self.params.precision is None:
            return ResolvedPrecision(Precision.FP32, self.device.type)
        return resolve_precision(self.params, self.device)

    # -- training ---------------------------------------------------------------------
    def train(self, params: NNTrainParams, *, train_step_fn: Callable[..., Any] | None = None,
              eval_step_fn: Callable[..., Any] | None = None, callbacks: Iterable[Any] = (),
              salt: str | None = None, verbose: bool | None = None,
              root: str | os.PathLike[str] = DEFAULT_ROOT,
              components: Iterable[Any] = (), history: Any = None,
              provenance: Any = None) -> NNRun:
        """Train on ``params.train_loader``; writes ``runs/<id>/`` and returns the run."""
        from nnx.training import train_model

        return train_model(self, params, train_step_fn=train_step_fn,
                           eval_step_fn=eval_step_fn, callbacks=list(callbacks), salt=salt,
                           verbose=verbose, root=os.fspath(root),
                           components=list(components), history=history,
                           provenance=provenance)

    # -- inference --------------------------------------------------------------------
    def _batches(self, data: Any) -> Iterable[tuple[tuple[torch.Tensor, ...], Any]]:
        if isinstance(data, np.ndarray):
            data = torch.from_numpy(data)
        if isinstance(data, torch.Tensor):
            for start in range(0, max(len(data), 1), _CHUNK):
                yield (data[start:start + _CHUNK].to(self.device),), None
        elif isinstance(data, Mapping):
            yield tuple(_to(v, self.device) for v in data.values()), None
        elif isinstance(data, tuple) and all(isinstance(x, torch.Tensor) for x in data):
            yield tuple(x.to(self.device) for x in data), None
        else:  # a loader, or any iterable of batches
            for batch in data:
                yield self.split_batch(batch)

    def _logits(self, data: Any) -> torch.Tensor:
        outputs = []
        with (preserved_state(self.net, mode="eval"), torch.no_grad(),
              self.inference_precision().autocast()):
            for inputs, _ in self._batches(data):
                outputs.append(self.forward_raw(inputs).float())
        if not outputs:
            raise ValueError("predict: no input rows")
        return torch.cat(outputs)

    def predict(self, data: Any) -> PredictResult:
        """Raw logits and the decoded classes (the task's decoding when declared)."""
        logits = self._logits(data)
        return PredictResult(logits=logits, classes=self.task_adapter.decode(logits))

    def predict_proba(self, data: Any, spec: ProbabilitySpec | None = None) -> PredictionResult:
        """Probabilities under ``spec`` (or the declared task's) with the same logits."""
        if spec is None:
            if self.params.task is None:
                raise ValueError("predict_proba needs a ProbabilitySpec when the model "
                                 "declares no task")
            spec = ProbabilitySpec.for_task(self.params.task)
        logits = self._logits(data)
        ids = np.arange(len(logits))
        return prediction_from_logits(logits, spec, sample_ids=ids)  # spec None: regression

    def evaluate(self, loader: Any, metrics: Sequence[Any] = (),
                 extra_metrics: Mapping[str, Callable[..., Any]] | None = None
                 ) -> NNEvaluationDataPoint:
        """The whole loader's record: loss and metrics over every valid sample."""
        adapter = self.task_adapter
        acc = adapter.accumulator(metrics=tuple(metrics))
        truths: list[np.ndarray] = []
        preds: list[np.ndarray] = []
        with (preserved_state(self.net, mode="eval"), torch.no_grad(),
              self.inference_precision().autocast()):
            for batch in loader:
                inputs, target = self.split_batch(batch)
                if target is None:
                    raise ValueError("evaluate needs (X, Y) batches; got no target")
                output = self.forward_raw(inputs).float()
                adapter.validate(output, target)
                num, den = adapter.loss_parts(output, target, self.loss_fn)
                acc.update(output, target, loss_numerator=float(num),
                           loss_denominator=float(den), validate=False)
                if extra_metrics:
                    y_true, y_pred = adapter.extra_metric_inputs(output, target)
                    truths.append(y_true)
                    preds.append(y_pred)
        record: NNEvaluationDataPoint = acc.result()
        if extra_metrics and truths:
            y_true, y_pred = np.concatenate(truths), np.concatenate(preds)
            extra = {**record.extra, **{name: float(fn(y_true, y_pred))
                                        for name, fn in extra_metrics.items()}}
            record = NNEvaluationDataPoint(**{**_fields(record), "extra": extra})
        return record

    # -- fine-tuning ------------------------------------------------------------------
    def freeze(self, *patterns: str) -> list[str]:
        from nnx.finetune import freeze

        return freeze(self.net, *patterns)

    def unfreeze(self, *patterns: str) -> list[str]:
        from nnx.finetune import unfreeze

        return unfreeze(self.net, *patterns)

    def export_state_dict(self, path: str | os.PathLike[str]) -> Path:
        """Save ``net.state_dict()`` alone, for consumers that do not use NNx."""
        from nnx.finetune import export_state_dict

        return export_state_dict(self.net, path)

    # -- reloading --------------------------------------------------------------------
    @classmethod
    def from_checkpoint(cls, checkpoint: NNCheckpoint | str | os.PathLike[str],
                        map_location: Any = "cpu") -> NNModel:
        """Rebuild the model a checkpoint was written from and load its weights."""
        if not isinstance(checkpoint, NNCheckpoint):
            checkpoint = NNCheckpoint.from_file(checkpoint, map_location=map_location)
        params = NNModelParams.from_state(checkpoint.model)
        if checkpoint.net is None:
            raise ValueError("this checkpoint holds no net params; it cannot be rebuilt")
        net_params = NNParams.resolve_from_state(checkpoint.net, params.net)
        model = cls(net_params=net_params, params=params)
        model.net.load_state_dict(checkpoint.state_dict)
        return model


def _to(value: Any, device: torch.device) -> Any:
    return value.to(device) if isinstance(value, torch.Tensor) else value


def _fields(record: NNEvaluationDataPoint) -> dict[str, Any]:
    return {name: getattr(record, name) for name in (
        "loss", "error", "accuracy", "f1", "recall", "precision", "metrics", "kind", "count",
        "status")}
