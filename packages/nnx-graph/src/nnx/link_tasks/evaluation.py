"""Scoring whole candidate sets: the evaluator's pass and ``LinkTask.predict`` (spec §26
"Exact metrics", "Shapes").

A pass runs every batch of one role through the net (checked first), keeps each
candidate's logits in float64 on the host, and orders everything by candidate id, so ids,
pairs, logits, probabilities and targets stay aligned whatever order the batches came in.
A validation or test pass must list each of its split's candidates exactly once (at most
``max_candidates``). The evaluator's record holds ``bce`` (the loss), and ``auroc`` / ``ap``
only when ``link_metrics`` can define them: a one-class set's record omits them, so
``MonitorSpec("auroc")`` never elects that epoch BEST.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from nnx import NNEvaluationDataPoint
from nnx.extend import preserved_state
from nnx.link_tasks.checks import BatchChecker, LinkBatch
from nnx.link_tasks.errors import LinkBatchError
from nnx.link_tasks.metrics import link_metrics
from nnx.link_tasks.split import LinkSplit

__all__ = ["LinkPrediction", "check_logits", "forward", "link_record", "net_device", "score_pass"]


@dataclass(frozen=True)
class LinkPrediction:
    """One role's candidates in id order: ``ids`` (K,), ``pairs`` (2, K), ``logits`` (K,) or
    (K, categories) float64, ``probabilities`` (sigmoid / softmax of the logits, float64)
    and ``targets`` (K,)."""

    role: str
    ids: torch.Tensor
    pairs: torch.Tensor
    logits: torch.Tensor
    probabilities: torch.Tensor
    targets: torch.Tensor

    def __len__(self) -> int:
        return int(self.ids.numel())


def net_device(model: Any) -> torch.device:
    """Where the model's net lives (its first parameter; CPU for a parameterless net)."""
    for parameter in model.net.parameters():
        device: torch.device = parameter.device
        return device
    return torch.device("cpu")


def check_logits(split: LinkSplit, output: Any, count: int) -> torch.Tensor:
    """The net's output as ``(K,)`` binary logits (a ``(K, 1)`` column is accepted) or
    ``(K, categories)`` edge-label logits, or :class:`LinkBatchError`."""
    want = (count,) if split.categories is None else (count, len(split.categories))
    if isinstance(output, torch.Tensor) and split.categories is None and \
            tuple(output.shape) == (count, 1):
        output = output.reshape(count)
    if not isinstance(output, torch.Tensor) or tuple(output.shape) != want:
        shape = tuple(output.shape) if isinstance(output, torch.Tensor) else \
            type(output).__name__
        raise LinkBatchError(f"the link net must return logits of shape {want} for {count} "
                             f"candidates; got {shape}")
    return output


def forward(model: Any, batch: LinkBatch, run: Callable[[list[Any]], torch.Tensor]
            ) -> torch.Tensor:
    """The net's inputs for ``batch`` on the net's device: (x, edge_index, pairs)."""
    device = net_device(model)
    return run([batch.x.to(device), batch.edge_index.to(device), batch.pairs.to(device)])


def score_pass(model: Any, checker: BatchChecker, batches: Iterable[Any], role: str, *,
               max_candidates: int) -> LinkPrediction:
    """Every batch of ``batches`` checked as ``role`` and scored in eval mode, no grad."""
    split = checker.split
    parts: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]] = []
    seen = 0
    with torch.no_grad(), preserved_state(model.net, mode="eval"):
        for raw in batches:
            batch = checker.parse(raw, role)
            seen += len(batch)
            if seen > max_candidates:
                raise LinkBatchError(f"the {role} pass holds more than max_candidates="
                                     f"{max_candidates} candidates: raise LinkTask."
                                     "max_candidates or score fewer")
            out = forward(model, batch, model.forward_raw)
            logits = check_logits(split, out, len(batch)).detach().to("cpu", torch.float64)
            parts.append((batch.ids, batch.pairs, logits, batch.targets))
    if not parts:
        raise LinkBatchError(f"the {role} loader gave no link batches")
    ids = torch.cat([p[0] for p in parts])
    order = torch.argsort(ids)
    ids = ids[order]
    if bool((ids[1:] == ids[:-1]).any()):
        raise LinkBatchError(f"a {role} candidate was scored twice: a pass lists each once")
    if role != "train":
        expected = split.candidate_ids(role)
        if ids.numel() != expected.numel() or not torch.equal(ids, expected):
            raise LinkBatchError(f"the {role} pass scored {ids.numel()} of the split's "
                                 f"{expected.numel()} {role} candidates: it must score each "
                                 "exactly once")
    logits = torch.cat([p[2] for p in parts])[order]
    probabilities = torch.sigmoid(logits) if logits.ndim == 1 else torch.softmax(logits, dim=1)
    return LinkPrediction(role=role, ids=ids, pairs=torch.cat([p[1] for p in parts], 1)[:, order],
                          logits=logits, probabilities=probabilities,
                          targets=torch.cat([p[3] for p in parts])[order])


def link_record(prediction: LinkPrediction) -> NNEvaluationDataPoint:
    """The evaluator's record of a scored pass (metrics from the float64 logits)."""
    values = link_metrics(prediction.logits, prediction.targets, from_logits=True)
    record = values.as_record()
    return NNEvaluationDataPoint(loss=record["bce"], metrics=record, kind="link",
                                 count=len(prediction), status="ok")
