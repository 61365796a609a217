"""nnx.link_tasks: link and edge prediction on one static homogeneous graph (spec §26).

``link_metrics`` scores a whole candidate set exactly (AUROC, AP, BCE in float64);
``link_predictor_spec`` is the registered link predictor recipe (``link.predictor@v1``).
"""

from nnx.link_tasks.metrics import LinkMetrics, LinkMetricsError, link_metrics
from nnx.link_tasks.predictor import LinkPredictor, link_predictor_spec

__all__ = ["LinkMetrics", "LinkMetricsError", "LinkPredictor", "link_metrics",
           "link_predictor_spec"]
