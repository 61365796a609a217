"""nnx.link_tasks: link and edge prediction on one static homogeneous graph (spec §26).

``link_metrics`` scores a whole candidate set exactly (AUROC, AP, BCE in float64).
"""

from nnx.link_tasks.metrics import LinkMetrics, LinkMetricsError, link_metrics

__all__ = ["LinkMetrics", "LinkMetricsError", "link_metrics"]
