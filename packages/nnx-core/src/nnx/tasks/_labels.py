"""A categorical batch's labels on the host: counted now, or when first read.

The default step's record of a CPU batch needs its predicted and true labels
counted. Doing that between one batch's forward and the next costs more than
the rest of the step's bookkeeping together: the step's torch work has pushed
NumPy and NNx's own code out of the CPU caches. So a batch whose loss is
already known keeps its detached output and a copy of its targets in a
:class:`PendingQueue`, and all of them are counted together when one record
is first read (the epoch's commit, when the history is written), or when the
queue holds more than :data:`PENDING_LIMIT` bytes. The scores of the counted
batches are computed together too, when the first of their records is read: the
confusions of equal width are stacked and scored with NumPy (:func:`batch_fields`),
~25 times faster than one batch at a time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from torch import Tensor

from nnx.tasks._macro import macro_rows, macro_scores

__all__ = ["CONFUSION_LIMIT", "PENDING_LIMIT", "SCORE_LIMIT", "BatchLabels", "PendingLabels",
           "PendingQueue", "batch_fields"]

#: Up to this many classes a batch's labels are counted as one C × C confusion bincount.
CONFUSION_LIMIT = 64
#: Bytes of outputs and targets a queue keeps before it counts them all.
PENDING_LIMIT = 32 << 20
#: Counted batches a queue keeps unscored (their records unread) before it scores them.
SCORE_LIMIT = 1024

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
        present = [a + b > 0 for a, b in zip(n_true, n_pred, strict=True)]
        return _scores(sum(tp), self.count, macro_scores(tp, n_true, n_pred, present))


def _scores(correct: int, count: int, macro: dict[str, float]) -> dict[str, Any]:
    accuracy = correct / count
    return {"accuracy": accuracy, "error": 1.0 - accuracy, **macro}


def batch_fields(batches: Sequence[BatchLabels]) -> list[dict[str, Any]]:
    """``[b.fields() if b.count else {} for b in batches]``, the same floats.

    The confusions of equal width are stacked and their integer counts taken together;
    a batch in which every class occurs (as a true or a predicted label) is scored by
    :func:`macro_rows`, any other by :meth:`BatchLabels.fields` itself.
    """
    out: list[dict[str, Any] | None] = [None] * len(batches)
    by_width: dict[int, tuple[list[int], list[npt.NDArray[np.int64]]]] = {}
    for i, labels in enumerate(batches):
        confusion = labels.confusion
        if not labels.count:
            out[i] = {}
        elif confusion is not None and confusion.size == labels.width ** 2:
            members, confusions = by_width.setdefault(labels.width, ([], []))
            members.append(i)
            confusions.append(confusion)
    for width, (members, confusions) in by_width.items():
        cm = np.stack(confusions).reshape(-1, width, width)
        tp = np.diagonal(cm, axis1=1, axis2=2)
        n_true, n_pred = cm.sum(axis=2), cm.sum(axis=1)
        correct = tp.sum(axis=1).tolist()
        full = np.flatnonzero(((n_true + n_pred) > 0).all(axis=1))
        macros = macro_rows(tp[full], n_true[full], n_pred[full])
        for row, macro in zip(full.tolist(), macros, strict=True):
            i = members[row]
            out[i] = _scores(correct[row], batches[i].count, macro)
    return [labels.fields() if values is None else values
            for labels, values in zip(batches, out, strict=True)]


class PendingLabels:
    """A batch's detached output and a copy of its targets, until they are counted.

    ``fields()`` is a deferred record's source (``nnx._foundation.records.deferred_record``):
    the scores, and the count of valid targets when the record carries it.
    """

    __slots__ = ("_fields", "_labels", "output", "queue", "target", "with_count")

    def __init__(self, queue: PendingQueue, output: Tensor, target: Tensor, *,
                 with_count: bool) -> None:
        self.queue = queue
        self.output: Tensor | None = output
        self.target: Tensor | None = target
        self.with_count = with_count
        self._labels: BatchLabels | None = None
        self._fields: dict[str, Any] | None = None  # the scores, once the queue computed them

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
        if self._fields is None:
            self.queue.score()  # a counted batch waits in the queue's unscored list
        assert self._fields is not None
        values = dict(self._fields)
        if self.with_count:
            values["count"] = labels.count
        return values


class PendingQueue:
    """The batches an adapter has not counted yet, oldest first."""

    def __init__(self, count: Counter) -> None:
        self.count = count
        self.items: deque[PendingLabels] = deque()
        self.unscored: list[PendingLabels] = []  # counted, their scores not computed yet
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
        items, count, unscored = self.items, self.count, self.unscored
        while items:
            pending = items.popleft()
            pending.settle(count)
            unscored.append(pending)
        self.nbytes = 0
        if len(unscored) > SCORE_LIMIT:  # records nobody reads must not pile up
            self.score()

    def score(self) -> None:
        """Score every counted batch whose record has not been read, together."""
        unscored, self.unscored = self.unscored, []
        labels = [pending.labels for pending in unscored]
        for pending, values in zip(unscored, batch_fields(labels), strict=True):
            pending._fields = values
