"""A categorical batch's labels on the host: counted now, or when first read.

The default step's record of a CPU batch needs its predicted and true labels
counted. Doing that between one batch's forward and the next costs more than
the rest of the step's bookkeeping together: the step's torch work has pushed
NumPy and NNx's own code out of the CPU caches. So a batch whose loss is
already known keeps its detached output and a copy of its targets in a
:class:`PendingQueue`, and all of them are counted together when one record
is first read (the epoch's commit, when the history is written), or when the
queue holds more than :data:`PENDING_LIMIT` bytes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from torch import Tensor

from nnx.tasks._base import macro_scores

__all__ = ["CONFUSION_LIMIT", "PENDING_LIMIT", "BatchLabels", "PendingLabels", "PendingQueue"]

#: Up to this many classes a batch's labels are counted as one C × C confusion bincount.
CONFUSION_LIMIT = 64
#: Bytes of outputs and targets a queue keeps before it counts them all.
PENDING_LIMIT = 32 << 20

Counter = Callable[[Tensor, Tensor, int], "BatchLabels"]


class BatchLabels:
    """One batch's valid (true, predicted) labels on the host: their C × C confusion
    counts (row-major, true × predicted), or the label arrays for wider outputs."""

    __slots__ = ("confusion", "count", "pred", "true", "width")

    def __init__(self, width: int, count: int, *,
                 confusion: npt.NDArray[np.int64] | None = None,
                 true: npt.NDArray[Any] | None = None,
                 pred: npt.NDArray[Any] | None = None) -> None:
        self.width, self.count = width, count
        self.confusion, self.true, self.pred = confusion, true, pred

    def fields(self) -> dict[str, Any]:
        """``_ClassCounts.fields`` of these confusion counts (the same floats)."""
        assert self.confusion is not None
        cm, width = self.confusion.tolist(), self.width
        rows = [cm[i:i + width] for i in range(0, width * width, width)]
        tp = cm[::width + 1]
        n_true = [sum(row) for row in rows]
        n_pred = [sum(column) for column in zip(*rows, strict=True)]
        accuracy = sum(tp) / self.count
        present = [a + b > 0 for a, b in zip(n_true, n_pred, strict=True)]
        return {"accuracy": accuracy, "error": 1.0 - accuracy,
                **macro_scores(tp, n_true, n_pred, present)}


class PendingLabels:
    """A batch's detached output and a copy of its targets, until they are counted.

    ``fields()`` is a deferred record's source (``nnx._foundation.records.deferred_record``):
    the scores, and the count of valid targets when the record carries it.
    """

    __slots__ = ("_labels", "output", "queue", "target", "with_count")

    def __init__(self, queue: PendingQueue, output: Tensor, target: Tensor, *,
                 with_count: bool) -> None:
        self.queue = queue
        self.output: Tensor | None = output
        self.target: Tensor | None = target
        self.with_count = with_count
        self._labels: BatchLabels | None = None

    @property
    def labels(self) -> BatchLabels:
        if self._labels is None:
            self.queue.settle()
        assert self._labels is not None
        return self._labels

    def settle(self, count: Counter) -> None:
        if self._labels is None:
            output, target = self.output, self.target
            assert output is not None and target is not None
            self.output = self.target = None  # release the tensors
            self._labels = count(output, target, output.shape[1])

    def fields(self) -> dict[str, Any]:
        labels = self.labels
        values = labels.fields() if labels.count else {}
        if self.with_count:
            values["count"] = labels.count
        return values


class PendingQueue:
    """The batches an adapter has not counted yet, oldest first."""

    def __init__(self, count: Counter) -> None:
        self.count = count
        self.items: deque[PendingLabels] = deque()
        self.nbytes = 0

    def defer(self, output: Tensor, target: Tensor, *, with_count: bool) -> PendingLabels:
        """Keep ``output`` (detached) and a copy of ``target``: a loader may refill the
        target's buffer in place for its next batch."""
        pending = PendingLabels(self, output, target.clone(), with_count=with_count)
        self.items.append(pending)
        self.nbytes += output.nbytes + target.nbytes
        if self.nbytes > PENDING_LIMIT:
            self.settle()
        return pending

    def settle(self) -> None:
        """Count every pending batch (the warm cache counts them far faster together)."""
        items, count = self.items, self.count
        while items:
            items.popleft().settle(count)
        self.nbytes = 0
