"""A PendingQueue's batches scored together (nnx.tasks._labels.batch_fields) give the very
floats BatchLabels.fields() gives one batch at a time: compared with ==, never approx."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from nnx.tasks import _labels
from nnx.tasks._labels import BatchLabels, PendingQueue, batch_fields
from nnx.tasks._macro import macro_rows, macro_scores, pairwise_sum

WIDTHS = (1, 2, 7, 8, 9, 10, 16, 64)


def labels_of(true: np.ndarray, pred: np.ndarray, width: int) -> BatchLabels:
    counts = np.bincount(true.astype(np.int64) * width + pred, minlength=width * width)
    return BatchLabels(width, int(true.size), confusion=counts)


def random_batches(rng: np.random.Generator, width: int, n: int) -> list[BatchLabels]:
    out = []
    for k in range(n):
        rows = int(rng.integers(0, 300)) if k % 5 else int(rng.integers(1, 4))
        classes = width if k % 3 else max(1, width // 2)  # some with absent classes
        true = rng.integers(0, classes, rows)
        pred = np.where(rng.random(rows) < 0.6, true, rng.integers(0, classes, rows))
        out.append(labels_of(true, pred, width))
    out.append(BatchLabels(width, 0, confusion=np.zeros(width * width, dtype=np.int64)))
    return out


def reference(batches: list[BatchLabels]) -> list[dict[str, object]]:
    return [b.fields() if b.count else {} for b in batches]


def test_numpy_sums_a_row_in_pairwise_sums_order() -> None:
    rng = np.random.default_rng(0)
    for rows in (1, 7, 240):
        for width in range(1, 129):
            table = rng.random((rows, width)) * rng.choice([1e-8, 1.0, 1e8], (rows, width))
            sums = np.add.reduce(table, axis=1).tolist()
            assert sums == [pairwise_sum(row) for row in table.tolist()]


@pytest.mark.parametrize("width", WIDTHS)
def test_batched_scores_are_the_per_batch_scores(width: int) -> None:
    rng = np.random.default_rng(width)
    batches = random_batches(rng, width, 60)
    assert batch_fields(batches) == reference(batches)


def test_macro_rows_are_macro_scores_of_full_rows() -> None:
    rng = np.random.default_rng(1)
    for width in (*WIDTHS, 100, 128, 200):
        n_true = rng.integers(1, 50, (20, width))
        n_pred = rng.integers(0, 50, (20, width))
        tp = np.minimum(n_true, n_pred) // 2
        expected = [macro_scores(tp[i], n_true[i], n_pred[i], np.ones(width, bool))
                    for i in range(20)]
        assert macro_rows(tp, n_true, n_pred) == expected


def test_mixed_widths_in_one_call() -> None:
    rng = np.random.default_rng(2)
    batches = [b for width in WIDTHS for b in random_batches(rng, width, 8)]
    order = rng.permutation(len(batches))
    mixed = [batches[i] for i in order]
    assert batch_fields(mixed) == reference(mixed)


def test_batches_with_every_class_take_the_numpy_path(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    batches = []
    for _ in range(30):
        true = np.concatenate([np.arange(10), rng.integers(0, 10, 200)])
        batches.append(labels_of(true, rng.integers(0, 10, true.size), 10))
    expected = reference(batches)
    calls = []
    original = BatchLabels.fields
    monkeypatch.setattr(BatchLabels, "fields", lambda self: calls.append(self) or original(self))
    assert batch_fields(batches) == expected
    assert calls == []


def _counter(output: torch.Tensor, target: torch.Tensor, width: int) -> BatchLabels:
    true, pred = target.numpy(), output.numpy().argmax(1)
    keep = true >= 0
    return labels_of(true[keep], pred[keep], width)


def queue_batches(queue: PendingQueue, rng: np.random.Generator) -> list[tuple]:
    out = []
    for k, width in enumerate((*WIDTHS, *WIDTHS)):
        rows = 40 + k
        target = torch.from_numpy(rng.integers(0, width, rows))
        if k == 3:
            target[:] = -100  # every target ignored: count 0
        output = torch.from_numpy(rng.random((rows, width)))
        pending = queue.defer(output, target, with_count=k % 2 == 0)
        out.append((pending, _counter(output, target, width), k % 2 == 0))
    return out


def test_a_pending_queue_reads_the_batched_scores() -> None:
    rng = np.random.default_rng(4)
    queue = PendingQueue(_counter)
    batches = queue_batches(queue, rng)
    for pending, labels, with_count in batches:
        expected = labels.fields() if labels.count else {}
        if with_count:
            expected["count"] = labels.count
        assert pending.fields() == expected
        assert pending.fields() == expected  # read again: the same, a fresh dict
    assert not queue.items and not queue.unscored


def test_a_queue_scores_what_nobody_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_labels, "SCORE_LIMIT", 4)
    queue = PendingQueue(_counter)
    batches = queue_batches(queue, np.random.default_rng(5))
    queue.settle()
    assert not queue.unscored  # more than SCORE_LIMIT counted: scored at once
    assert all(pending.fields() == (labels.fields() if labels.count else {})
               | ({"count": labels.count} if with_count else {})
               for pending, labels, with_count in batches)
