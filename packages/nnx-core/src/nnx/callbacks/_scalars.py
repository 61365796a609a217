"""The scalars a logger callback reports for one epoch (spec §5, §6.3, §6.4).

TensorBoardCallback and WandbCallback write exactly the keys built here, so
the two backends always agree. The scheme, one key per value:

- ``train/<field>``: the epoch's last training batch (``train_edp``);
- ``val/<field>``: the validation pass (``val_edp``);
- ``train_epoch/<field>``: the whole-epoch training summary (``train_summary``);
- ``<split>/metrics/<name>``: each entry of that record's ``metrics``;
- ``<split>/extra/<name>``: each entry of that record's ``extra``;
- ``lr``: the primary optimizer's learning rate at the epoch's end;
- ``monitor/<split>.<metric>``: the named monitor's value, when finite;
- ``monitor/improved``: 1.0 when the monitor improved this epoch, else 0.0.

``<field>`` is one of loss, error, accuracy, f1, recall, precision, and only
the fields a record actually carries are reported: a regression record has
no accuracy, so nothing is fabricated or zero-filled. Metrics always sit
under ``metrics/``, so a declared metric named like a field (``accuracy``)
is reported as ``val/metrics/accuracy`` beside ``val/accuracy``; a task's
own metrics (``mse``, ``mae``) appear as ``val/metrics/mse`` and so on.
A NaN or ±inf field is reported as it is (a diverged loss stays visible);
only the monitor's value is left out when it is not finite.

Per-batch scalars (TensorBoard's ``log_every_n_batches``) use the
``train_batch/`` prefix with the same ``<field>`` / ``metrics/`` /
``extra/`` layout, plus ``train_batch/lr`` (the learning rate the batch ran
with).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from nnx._foundation.records import EDP_FIELDS

if TYPE_CHECKING:
    from nnx._foundation.records import NNEvaluationDataPoint, NNIterationDataPoint
    from nnx.callbacks.base import CallbackContext

__all__ = ["batch_scalars", "edp_scalars", "epoch_scalars"]

#: (key prefix, NNIterationDataPoint attribute) of each record an epoch reports.
EPOCH_RECORDS = (("train", "train_edp"), ("val", "val_edp"), ("train_epoch", "train_summary"))


def edp_scalars(prefix: str, edp: NNEvaluationDataPoint | None) -> dict[str, float]:
    """``<prefix>/<field>``, ``<prefix>/metrics/<name>`` and ``<prefix>/extra/<name>``."""
    if edp is None:
        return {}
    out: dict[str, float] = {}
    for name in EDP_FIELDS:
        value = getattr(edp, name)
        if value is not None:
            out[f"{prefix}/{name}"] = float(value)
    for name, value in edp.metrics.items():
        out[f"{prefix}/metrics/{name}"] = float(value)
    for name, value in edp.extra.items():
        out[f"{prefix}/extra/{name}"] = float(value)
    return out


def epoch_scalars(ctx: CallbackContext) -> dict[str, float]:
    """Every scalar of the epoch that just ended (``ctx.idp``), keyed as in the module doc."""
    idp = ctx.idp
    if idp is None:
        return {}
    out: dict[str, float] = {}
    for prefix, attribute in EPOCH_RECORDS:
        out.update(edp_scalars(prefix, getattr(idp, attribute)))
    if ctx.optimizer is not None:
        out["lr"] = float(ctx.optimizer.param_groups[0]["lr"])
    elif idp.lr is not None:
        out["lr"] = float(idp.lr)
    selection = idp.selection
    if selection is not None:
        value = selection.value
        if value is not None and math.isfinite(value):
            out[f"monitor/{selection.key}"] = value
        out["monitor/improved"] = 1.0 if selection.improved else 0.0
    return out


def batch_scalars(idp: NNIterationDataPoint) -> dict[str, float]:
    """One training batch's scalars under ``train_batch/``."""
    out = edp_scalars("train_batch", idp.train_edp)
    if idp.lr is not None:
        out["train_batch/lr"] = float(idp.lr)
    return out
