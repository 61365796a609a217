"""Probability-aware prediction (spec §3.1): declared specs, never inferred ones.

A :class:`ProbabilitySpec` says how logits become probabilities and decoded
values. The kind is declared, not guessed from the loss or the output shape,
because a ``(N, 5)`` output can be five exclusive classes or five independent
labels. :func:`prediction_from_logits` is the one place that computation
lives; ``NNModel.predict_proba`` and every other prediction path call it, so
the same logits decode the same way on every route.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from nnx._foundation.validation import OPEN_UNIT, check_choice, check_count, check_real
from nnx.params.task import TaskSpec

__all__ = [
    "Decoded",
    "PredictResult",
    "PredictionResult",
    "ProbabilitySpec",
    "decode_on_axis",
    "net_class_axis",
    "prediction_from_logits",
    "shuffling_sampler",
    "warn_if_shuffled",
]

_KINDS = ("categorical", "bernoulli")
_DEFAULT_THRESHOLD = 0.5

#: Decoded values: an integer tensor, or a NumPy string array for string labels.
Decoded = torch.Tensor | npt.NDArray[np.str_]


@dataclass(frozen=True, slots=True)
class ProbabilitySpec:
    """How to read logits as probabilities.

    * ``"categorical"``: softmax over ``class_axis``; decoded by argmax, mapped
      through ``labels`` when given.
    * ``"bernoulli"``: independent element-wise sigmoid, not normalized;
      decoded as 0/1 indicators, ``probability >= threshold`` (``threshold``
      defaults to 0.5, where the rule is exactly ``logit >= 0``; it is applied
      as ``logit >= log(t / (1 - t))``, its exact equivalent).

    ``class_axis`` is >= 1 because axis 0 is always the sample axis (the one
    ``sample_ids`` index). ``labels`` names the entries along ``class_axis``
    in order: all strings or all integers, no duplicates.
    """

    kind: str
    class_axis: int = 1
    labels: tuple[str, ...] | tuple[int, ...] | None = None
    threshold: float | None = None

    def __post_init__(self) -> None:
        check_choice("ProbabilitySpec.kind", self.kind, _KINDS)
        axis = check_count("ProbabilitySpec.class_axis", self.class_axis, minimum=1)
        object.__setattr__(self, "class_axis", axis)
        object.__setattr__(self, "labels", _check_labels(self.labels, self.kind))
        if self.kind == "bernoulli":
            # Same domain as TaskSpec.threshold, so for_task never refuses a valid task.
            raw = _DEFAULT_THRESHOLD if self.threshold is None else self.threshold
            threshold = float(check_real("ProbabilitySpec.threshold", raw, OPEN_UNIT))
            object.__setattr__(self, "threshold", threshold)
        elif self.threshold is not None:
            raise ValueError(
                "ProbabilitySpec.threshold applies to bernoulli specs; categorical "
                f"decoding is argmax (got threshold={self.threshold!r})"
            )

    @classmethod
    def for_task(
        cls, task: TaskSpec, *, labels: Sequence[str] | Sequence[int] | None = None
    ) -> ProbabilitySpec | None:
        """The spec a declared task implies; ``None`` for regression (no probabilities)."""
        if not isinstance(task, TaskSpec):
            raise ValueError(f"for_task expects a TaskSpec; got {type(task).__name__}")
        if task.kind == "regression":
            if labels is not None:
                raise ValueError("a regression task has no labels to decode into")
            return None
        if labels is not None and len(labels) != task.num_outputs:
            raise ValueError(
                f"labels has {len(labels)} entries but the {task.kind} task declares "
                f"{task.num_outputs} outputs"
            )
        names: Any = None if labels is None else tuple(labels)  # __post_init__ checks them
        if task.kind == "categorical":
            return cls("categorical", labels=names)
        return cls("bernoulli", labels=names, threshold=task.threshold)


def _check_labels(labels: Any, kind: str) -> tuple[str, ...] | tuple[int, ...] | None:
    if labels is None:
        return None
    if isinstance(labels, (str, bytes)) or not isinstance(labels, Iterable):
        raise ValueError(f"ProbabilitySpec.labels must be a sequence or None; got {labels!r}")
    items: list[str | int] = []
    for i, value in enumerate(labels):
        if isinstance(value, str) and value:
            items.append(str(value))  # np.str_ -> str, so specs compare and hash plainly
        elif isinstance(value, numbers.Integral) and not isinstance(value, bool):
            items.append(int(value))
        else:
            raise ValueError(
                f"ProbabilitySpec.labels[{i}] must be a non-empty string or an integer; "
                f"got {value!r} ({type(value).__name__})"
            )
    minimum = 2 if kind == "categorical" else 1
    if len(items) < minimum:
        raise ValueError(f"ProbabilitySpec.labels needs >= {minimum} entries for {kind}")
    # Mixed labels would make decoded values a heterogeneous array; refuse them.
    if len({type(v) for v in items}) > 1:
        raise ValueError("ProbabilitySpec.labels must be all strings or all integers")
    duplicates = sorted({repr(v) for v in items if items.count(v) > 1})
    if duplicates:
        raise ValueError(f"ProbabilitySpec.labels has duplicates: {', '.join(duplicates)}")
    return tuple(items)  # type: ignore[return-value]  # homogeneous, checked above


@dataclass(frozen=True, slots=True)
class PredictResult:
    """What plain ``predict()`` returns: the raw logits and the decoded classes."""

    logits: torch.Tensor
    classes: torch.Tensor


@dataclass(frozen=True, slots=True)
class PredictionResult:
    """Logits with their probabilities and decoded values, under a declared spec.

    ``spec`` and ``probabilities`` are both ``None`` for regression, whose
    continuous values sit in ``decoded``. ``sample_ids`` names each row along
    axis 0 (ids may repeat); any integer sequence, array or tensor given is
    stored as a private read-only 1-D NumPy int64 array, because ids are host
    metadata that calibration and abstention consume as arrays.
    """

    logits: torch.Tensor
    probabilities: torch.Tensor | None
    decoded: Decoded
    spec: ProbabilitySpec | None
    sample_ids: npt.NDArray[np.integer[Any]]

    def __post_init__(self) -> None:
        if (self.spec is None) != (self.probabilities is None):
            raise ValueError(
                "PredictionResult: probabilities and spec are both None (regression) or both set"
            )
        rows = int(self.logits.shape[0]) if self.logits.dim() else 0
        object.__setattr__(self, "sample_ids", _as_sample_ids(self.sample_ids, rows))

    @property
    def class_indices(self) -> torch.Tensor:
        """Argmax class indices; categorical results only.

        A bernoulli result's decoded values are per-label 0/1 indicators, and a
        regression result's are continuous; feeding either to a class-index
        consumer (a confusion matrix, say) would be silently wrong, so both refuse.
        """
        spec = self.spec
        if spec is None or spec.kind != "categorical":
            what = "regression" if spec is None else spec.kind
            raise AttributeError(
                f"class_indices exists only for categorical results; this result is {what}, "
                "whose decoded values are not class indices (use .decoded)"
            )
        return self.logits.argmax(dim=spec.class_axis)


def prediction_from_logits(
    logits: torch.Tensor | npt.NDArray[Any],
    spec: ProbabilitySpec | None,
    sample_ids: Sequence[int] | npt.NDArray[Any] | torch.Tensor | None = None,
) -> PredictionResult:
    """Compute probabilities and decoded values from raw logits.

    ``spec=None`` means regression: no probabilities, the values themselves
    are decoded. ``sample_ids`` defaults to the row index ``0..N-1``. Nothing
    here records autograd history: the logits are detached first.
    """
    raw = _as_logits(logits)
    rows = int(raw.shape[0])
    ids = _as_sample_ids(np.arange(rows) if sample_ids is None else sample_ids, rows)
    if spec is None:
        return PredictionResult(raw, None, raw, None, ids)
    if not isinstance(spec, ProbabilitySpec):
        raise ValueError(
            f"spec must be a ProbabilitySpec or None (regression); got {type(spec).__name__}"
        )
    width = _class_width(raw, spec)
    if spec.kind == "categorical":
        if width < 2:
            raise ValueError(f"categorical logits need >= 2 classes on axis {spec.class_axis}")
        probabilities = torch.softmax(raw, dim=spec.class_axis, dtype=_prob_dtype(raw))
        # Argmax over logits, not probabilities: softmax can round distinct
        # logits to equal probabilities, and class_indices uses the logits too.
        decoded: Decoded = _map_labels(raw.argmax(dim=spec.class_axis), spec.labels)
    else:
        probabilities = torch.sigmoid(raw.to(_prob_dtype(raw)))
        threshold = _DEFAULT_THRESHOLD if spec.threshold is None else spec.threshold
        # sigmoid(x) >= t  <=>  x >= log(t / (1 - t)): decide on the logits, as the
        # multilabel task adapter does, so predict() and this agree bit for bit.
        # Float sigmoid would round tiny negative logits up to exactly 0.5; at
        # t = 0.5 the cut is exactly the spec's `logit >= 0`.
        decoded = (raw >= math.log(threshold / (1.0 - threshold))).to(torch.int64)
    return PredictionResult(raw, probabilities, decoded, spec, ids)


def _prob_dtype(raw: torch.Tensor) -> torch.dtype:
    """Half-precision logits get float32 probabilities, so rows still sum to 1."""
    return torch.promote_types(raw.dtype, torch.float32)


def _as_logits(logits: torch.Tensor | npt.NDArray[Any]) -> torch.Tensor:
    if isinstance(logits, np.ndarray):
        logits = torch.from_numpy(logits)
    if not isinstance(logits, torch.Tensor):
        raise ValueError(f"logits must be a tensor or NumPy array; got {type(logits).__name__}")
    if not logits.is_floating_point():
        raise ValueError(f"logits must be floating point; got dtype {logits.dtype}")
    if logits.dim() == 0:
        raise ValueError("logits must have a sample axis (axis 0); got a scalar")
    return logits.detach()


def _as_sample_ids(sample_ids: Any, rows: int) -> npt.NDArray[np.int64]:
    if isinstance(sample_ids, torch.Tensor):
        sample_ids = sample_ids.detach().cpu().numpy()
    array = np.asarray(sample_ids)
    if array.size == 0:
        array = array.astype(np.int64)  # [] parses as float64; an empty id list is fine
    if array.dtype.kind not in "iu":
        raise ValueError(f"sample_ids must be integers; got dtype {array.dtype}")
    if array.ndim != 1 or array.shape[0] != rows:
        raise ValueError(
            f"sample_ids must be 1-D with one id per row ({rows}); got shape {array.shape}"
        )
    # A private read-only copy: the result is frozen, so neither a caller's later
    # edit of its array nor an edit through the result may change the ids.
    ids = array.astype(np.int64, copy=True)
    ids.flags.writeable = False
    return ids


def _class_width(raw: torch.Tensor, spec: ProbabilitySpec) -> int:
    if spec.class_axis >= raw.dim():
        raise ValueError(
            f"ProbabilitySpec.class_axis={spec.class_axis} does not exist in logits of "
            f"shape {tuple(raw.shape)}"
        )
    width = int(raw.shape[spec.class_axis])
    if spec.labels is not None and len(spec.labels) != width:
        raise ValueError(
            f"ProbabilitySpec.labels has {len(spec.labels)} entries but logits have {width} "
            f"along axis {spec.class_axis}"
        )
    return width


def _map_labels(indices: torch.Tensor, labels: tuple[str, ...] | tuple[int, ...] | None) -> Decoded:
    if labels is None:
        return indices
    if isinstance(labels[0], str):
        names: npt.NDArray[np.str_] = np.asarray(labels, dtype=np.str_)[indices.cpu().numpy()]
        return names
    table = torch.tensor(labels, dtype=torch.int64, device=indices.device)
    return table[indices]


def net_class_axis(net: Any) -> int | None:
    """The axis of ``net``'s output that holds the classes, when the net declares one.

    A net whose classes are not on axis 1 sets a ``class_axis`` attribute (an int;
    negative counts from the end): a TransformerNN's ``(batch, seq, vocab)`` logits
    declare ``-1``. None (no attribute): axis 1, the classifier's ``(N, C)`` layout.
    """
    axis = getattr(net, "class_axis", None)
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, int)):
        raise TypeError(f"{type(net).__name__}.class_axis must be an int (the output axis "
                        f"that holds the classes) or None; got {axis!r}")
    return axis


def class_axis_in(logits: torch.Tensor, axis: int | None) -> int:
    """``axis`` (None: 1) as a non-negative axis of ``logits``; axis 0 is the samples."""
    if axis is None:
        return 1
    rank = logits.dim()
    if not -rank <= axis < rank or axis % rank == 0:
        raise ValueError(f"the net's class_axis={axis} is not a class axis of its output of "
                         f"shape {tuple(logits.shape)} (axis 0 holds the samples)")
    return axis % rank


def decode_on_axis(decode: Callable[[torch.Tensor], torch.Tensor], logits: torch.Tensor,
                   axis: int | None) -> torch.Tensor:
    """``decode`` (which reads classes on axis 1) applied with the classes on ``axis``.

    The class axis is moved to 1 for the decoder; an argmax drops it, so the rest keep
    their order (``(B, T, V)`` gives ``(B, T)``), and an elementwise decoding (a
    threshold, a regression's values) is moved back to the logits' layout.
    """
    at = class_axis_in(logits, axis) if logits.dim() > 1 else 1
    if at == 1:
        return decode(logits)
    moved = decode(logits.movedim(at, 1))
    return moved.movedim(1, at) if moved.dim() == logits.dim() else moved


def shuffling_sampler(data: Any) -> Any | None:
    """The sampler that reorders ``data``'s rows on every pass, or None.

    Only a ``torch.utils.data.DataLoader`` is inspected: its sampler, or the
    sampler inside its batch sampler, is shuffling when it is a RandomSampler,
    SubsetRandomSampler, WeightedRandomSampler or a sampler with ``shuffle=True``
    (DistributedSampler). Other iterables of batches say nothing about order.
    """
    from torch.utils.data import (
        DataLoader,
        RandomSampler,
        SubsetRandomSampler,
        WeightedRandomSampler,
    )

    if not isinstance(data, DataLoader):
        return None
    batch_sampler = getattr(data, "batch_sampler", None)
    for sampler in (data.sampler, getattr(batch_sampler, "sampler", None)):
        if isinstance(sampler, (RandomSampler, SubsetRandomSampler, WeightedRandomSampler)):
            return sampler
        if getattr(sampler, "shuffle", False) is True:
            return sampler
    return None


def warn_if_shuffled(data: Any, *, caller: str = "predict_proba", stacklevel: int = 3) -> None:
    """Warn that a shuffling loader's sample ids are iteration positions (§3.1, §21).

    An ordinary loader's rows are identified by their position in this pass;
    with a shuffling sampler that position names a different dataset row on
    every pass, so the ids cannot be joined back to the data.
    """
    sampler = shuffling_sampler(data)
    if sampler is None:
        return
    warnings.warn(
        f"{caller}: the DataLoader shuffles ({type(sampler).__name__}), so sample_ids are "
        "iteration positions in this pass, not dataset indices, and name different rows on "
        "every pass; predict with a non-shuffling loader (shuffle=False) to identify rows",
        RuntimeWarning, stacklevel=stacklevel)
