"""Fields shared by NNTrainParams and NNTrainerParams: epochs, data, seed, lineage."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from nnx._foundation.config_base import (
    Params,
    always,
    empty_mapping,
    frozen_mapping,
    runtime,
    set_field,
)
from nnx._foundation.validation import (
    check_choice,
    check_count,
    check_optional_str,
    check_run_id,
    check_seed,
)
from nnx.params._loaders import check_loader
from nnx.params.metric import MetricSpec
from nnx.params.monitor import MonitorSpec, check_monitor

__all__ = ["LOOP_DECODERS", "RESUME_MODES", "LoopParams"]

#: How a resume restores state (§14.2): pick automatically, require the full
#: training state, or warm-start from the weights alone.
RESUME_MODES = ("auto", "stateful", "weights_only")

L = TypeVar("L", bound="LoopParams")

#: Decoders for the shared fields; each loop class merges them into its own.
def _metrics(items: Any) -> tuple[MetricSpec, ...]:
    return tuple(MetricSpec.from_state(item) for item in items)


def _monitor(item: Any) -> MonitorSpec | None:
    return None if item is None else MonitorSpec.from_state(item)


LOOP_DECODERS: dict[str, Callable[[Any], Any]] = {"metrics": _metrics, "monitor": _monitor}


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopParams(Params):
    """Epoch count, loaders and the run controls both training loops share.

    Runtime-only (never in ``state()``): the loaders, ``extra_metrics``,
    ``overwrite_existing``, the resume request and ``async_commit``. A resume request is
    recorded as lineage: ``parent_run_id`` / ``parent_checkpoint``.

    ``async_commit`` (default True): each epoch's commit is written by a background
    writer while the next epoch trains (docs/durability.md, "The durability window");
    False writes it before the next epoch starts, as NNx did before.
    """

    n_epochs: int = always(10)
    train_loader: Any = runtime()
    val_loader: Any = runtime()
    seed: int | None = None
    data_id: str | None = None
    save_phase_checkpoints: bool = True
    parent_run_id: str | None = None
    parent_checkpoint: str | None = None
    metrics: tuple[MetricSpec, ...] = ()
    monitor: MonitorSpec | None = None
    extra_metrics: Mapping[str, Callable[..., Any]] = runtime(factory=empty_mapping)
    overwrite_existing: bool = runtime(False)
    resume_from_run_id: str | None = runtime()
    resume_from_checkpoint: str | None = runtime()
    resume_mode: str = runtime("auto")
    async_commit: bool = runtime(True)

    def _validate_loop(self) -> None:
        n = f"{type(self).__name__}."
        set_field(self, "n_epochs", check_count(n + "n_epochs", self.n_epochs))
        if self.seed is not None:
            set_field(self, "seed", check_seed(n + "seed", self.seed))
        check_optional_str(n + "data_id", self.data_id)
        check_loader(n + "train_loader", self.train_loader, training=True)
        check_loader(n + "val_loader", self.val_loader, training=False)
        for flag in ("save_phase_checkpoints", "overwrite_existing", "async_commit"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(f"{n}{flag} must be a bool; got {getattr(self, flag)!r}")
        metrics = self.extra_metrics
        if not isinstance(metrics, Mapping):
            raise ValueError(f"{n}extra_metrics must be a mapping of name -> callable")
        for key, fn in metrics.items():
            if not isinstance(key, str) or not callable(fn):
                raise ValueError(f"{n}extra_metrics[{key!r}] must map a name to a callable")
        set_field(self, "extra_metrics", frozen_mapping(metrics))
        self._validate_declarations(n)
        self._validate_lineage(n)

    def _validate_declarations(self, n: str) -> None:
        specs = tuple(self.metrics)
        for i, spec in enumerate(specs):
            if not isinstance(spec, MetricSpec):
                raise ValueError(f"{n}metrics[{i}] must be a MetricSpec; got {spec!r}")
        labels = [spec.label for spec in specs]
        duplicates = sorted({label for label in labels if labels.count(label) > 1})
        if duplicates:
            raise ValueError(f"{n}metrics report {', '.join(map(repr, duplicates))} twice; "
                             "give one of them a distinct name=")
        set_field(self, "metrics", specs)
        if self.monitor is not None:
            if not isinstance(self.monitor, MonitorSpec):
                raise ValueError(f"{n}monitor must be a MonitorSpec or None; got {self.monitor!r}")
            check_monitor(self.monitor, labels)

    def _validate_lineage(self, n: str) -> None:
        check_choice(n + "resume_mode", self.resume_mode, RESUME_MODES)
        for field in ("parent_run_id", "parent_checkpoint", "resume_from_run_id",
                      "resume_from_checkpoint"):
            value = check_optional_str(n + field, getattr(self, field))
            if value is not None:  # a resume source is a directory under the runs root
                check_run_id(n + field, value,
                             what="run id" if field.endswith("run_id") else "checkpoint tag")
        if self.resume_from_run_id is None:
            if self.resume_from_checkpoint is not None:
                raise ValueError(
                    f"{n}resume_from_checkpoint needs resume_from_run_id (the run to resume)"
                )
            if self.parent_checkpoint is not None and self.parent_run_id is None:
                raise ValueError(f"{n}parent_checkpoint needs parent_run_id")
            return
        if self.parent_run_id not in (None, self.resume_from_run_id):
            raise ValueError(
                f"{n}parent_run_id ({self.parent_run_id!r}) contradicts resume_from_run_id "
                f"({self.resume_from_run_id!r})"
            )
        checkpoint = self.resume_from_checkpoint or "last"
        if self.parent_checkpoint not in (None, checkpoint):
            raise ValueError(
                f"{n}parent_checkpoint ({self.parent_checkpoint!r}) contradicts "
                f"resume_from_checkpoint ({checkpoint!r})"
            )
        set_field(self, "parent_run_id", self.resume_from_run_id)
        set_field(self, "parent_checkpoint", checkpoint)

    def with_train_loader(self: L, loader: Any) -> L:
        """A copy training on ``loader`` (same state, same run id)."""
        return dataclasses.replace(self, train_loader=loader)

    def with_val_loader(self: L, loader: Any) -> L:
        """A copy validating on ``loader`` (same state, same run id)."""
        return dataclasses.replace(self, val_loader=loader)
