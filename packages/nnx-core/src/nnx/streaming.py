"""Streaming prediction and mergeable metrics (spec §21).

``NNModel.iter_predict(loader)`` yields one batch's predictions at a time;
:class:`StreamingMetrics` accumulates declared metrics in bounded memory and merges
across chunks; :func:`streaming_eval_step` is the bounded ``eval_step_fn``.
"""

from nnx._engine.evaluation import streaming_eval_step
from nnx._engine.prediction_stream import (
    PredictionBatch,
    PredictionStream,
    StreamClosedError,
    concatenate_predictions,
)
from nnx._engine.streaming_metrics import (
    SEMANTICS,
    MetricMergeError,
    MetricSnapshot,
    StreamingMetrics,
    UnboundedMetricError,
)

__all__ = [
    "SEMANTICS",
    "MetricMergeError",
    "MetricSnapshot",
    "PredictionBatch",
    "PredictionStream",
    "StreamClosedError",
    "StreamingMetrics",
    "UnboundedMetricError",
    "concatenate_predictions",
    "streaming_eval_step",
]
