"""Named metrics (spec §6.4): declared by MetricSpec, computed over the whole loader.

The built-ins at version 1, ``accuracy`` and ``f1`` (labels, max), ``nll`` and
``brier`` (probabilities, min), ``mae`` and ``mse`` (continuous, min), are
announced by nnx-core's own ``nnx.metrics`` entry points, the path add-on metrics
take (nnx.metrics.builtin). A metric registered with ``input=TASK_METRIC_INPUT`` is
computed by its task's own evaluation step, never row by row (issue 39).
"""

from nnx.metrics.builtin import F1_AVERAGES, register_builtin_metrics
from nnx.metrics.registry import (
    METRIC_INPUTS,
    METRIC_MODES,
    RESERVED_NAMES,
    TASK_METRIC_INPUT,
    MetricAccumulator,
    MetricRegistration,
    MetricSource,
    MissingMetricError,
    check_metric_inputs,
    metric_modes,
    register_metric,
    registered_metrics,
    resolve_metric,
    row_metrics,
    unregister_metric,
)
from nnx.params.metric import MetricSpec

__all__ = [
    "F1_AVERAGES",
    "METRIC_INPUTS",
    "METRIC_MODES",
    "RESERVED_NAMES",
    "TASK_METRIC_INPUT",
    "MetricAccumulator",
    "MetricRegistration",
    "MetricSource",
    "MetricSpec",
    "MissingMetricError",
    "check_metric_inputs",
    "metric_modes",
    "register_builtin_metrics",
    "register_metric",
    "registered_metrics",
    "resolve_metric",
    "row_metrics",
    "unregister_metric",
]
