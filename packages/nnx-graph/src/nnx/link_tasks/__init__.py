"""nnx.link_tasks: link and edge prediction on one static homogeneous graph (spec §26).

``split_links`` (also spelled ``plan_link_split``) derives a :class:`LinkSplit`, the
``nnx.link-split/1`` manifest: canonical train / validation / test positives, fixed
validation / test negatives from the static complement, and the policy (directedness,
self-loops, seed, topology). ``split.message_edge_index()`` is the only message graph.
:class:`LinkTask` is a Task-protocol object (``NNModel(module=net, task=LinkTask(split))``):
its loaders (``task.loader(name, x, batch_size)``) re-draw training negatives per epoch
from ``(seed, epoch)`` through ``set_epoch``, its objective and evaluator check every batch
against the split before any forward pass, and ``task.predict`` scores a role's
candidates in id order. ``link_metrics`` scores a whole candidate set exactly (AUROC, AP,
BCE in float64); ``link_predictor_spec`` is the registered link predictor recipe
(``link.predictor@v1``).
"""

from nnx.link_tasks.errors import (
    LinkBatchError,
    LinkCapacityError,
    LinkReplayError,
    LinkSplitError,
)
from nnx.link_tasks.evaluation import LinkPrediction
from nnx.link_tasks.loader import LinkLoader
from nnx.link_tasks.metrics import LinkMetrics, LinkMetricsError, link_metrics
from nnx.link_tasks.predictor import LinkPredictor, link_predictor_spec
from nnx.link_tasks.split import LinkSplit, plan_link_split, split_links
from nnx.link_tasks.task import LinkObjective, LinkTask

__all__ = [
    "LinkBatchError",
    "LinkCapacityError",
    "LinkLoader",
    "LinkMetrics",
    "LinkMetricsError",
    "LinkObjective",
    "LinkPrediction",
    "LinkPredictor",
    "LinkReplayError",
    "LinkSplit",
    "LinkSplitError",
    "LinkTask",
    "link_metrics",
    "link_predictor_spec",
    "plan_link_split",
    "split_links",
]
