"""NNCheckpoint: a model's weights at an epoch, with what is needed to read them back.

A checkpoint file ``checkpoints/<tag>.pt`` holds the net's state dict, the
run's configuration states, the epoch and its last record (which scores it).
Training state (optimizer, scheduler, scaler, RNG streams) goes to the
sidecar ``<tag>.pt.opt.pt``, written first, so a checkpoint never names state
that is not on disk yet. Both go through the atomic writer.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from nnx._atomic import atomic_write
from nnx.enums.checkpoints import Checkpoints
from nnx.records import NNIterationDataPoint, first_finite

__all__ = ["CHECKPOINT_FORMAT", "NNCheckpoint", "sidecar_path"]

CHECKPOINT_FORMAT = "nnx.checkpoint/1"


def sidecar_path(checkpoint: str | os.PathLike[str]) -> Path:
    """Where a checkpoint's training state lives: ``<tag>.pt.opt.pt``."""
    return Path(f"{os.fspath(checkpoint)}.opt.pt")


def _save(path: Path, payload: dict[str, Any]) -> None:
    atomic_write(path, lambda f: torch.save(payload, f))


@dataclass(eq=False)
class NNCheckpoint:
    """One saved model state. ``score`` is its control signal (lower is better)."""

    tag: str
    epoch: int
    run_id: str
    state_dict: Mapping[str, torch.Tensor]
    model: Mapping[str, Any]
    train: Mapping[str, Any]
    net: Mapping[str, Any] | None = None
    idp: NNIterationDataPoint | None = None
    named_monitor: bool = False
    monitor_value: float | None = None
    training_state_present: bool = False
    reconstructible: bool = True
    transforms: tuple[Any, ...] = ()
    path: Path | None = field(default=None, compare=False)

    @property
    def score(self) -> float:
        """The first finite of val error → val loss → train error → train loss; +inf if none.

        A named-monitor run scores by its monitor's value instead.
        """
        if self.named_monitor:
            value = self.monitor_value
            return value if value is not None and math.isfinite(value) else math.inf
        found = None if self.idp is None else first_finite(self.idp)
        return math.inf if found is None else found[1]

    def payload(self) -> dict[str, Any]:
        return {
            "format": CHECKPOINT_FORMAT,
            "tag": self.tag,
            "epoch": self.epoch,
            "run_id": self.run_id,
            "model": dict(self.model),
            "net": None if self.net is None else dict(self.net),
            "train": dict(self.train),
            "idp": None if self.idp is None else self.idp.state(),
            "named_monitor": self.named_monitor,
            "monitor_value": self.monitor_value,
            "training_state_present": self.training_state_present,
            "reconstructible": self.reconstructible,
            "transforms": list(self.transforms),
            "state_dict": dict(self.state_dict),
        }

    def save(self, path: str | os.PathLike[str], training_state: Mapping[str, Any] | None = None
             ) -> Path:
        """Write the sidecar (when given) and then the checkpoint, each atomically."""
        dest = Path(path)
        dest.parent.mkdir(parents=True, exist_ok=True)
        if training_state is not None:
            _save(sidecar_path(dest), dict(training_state))
            self.training_state_present = True
        _save(dest, self.payload())
        self.path = dest
        return dest

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], map_location: Any = "cpu") -> NNCheckpoint:
        """Read a checkpoint; tensors land on ``map_location`` (CPU by default)."""
        payload = torch.load(os.fspath(path), map_location=map_location, weights_only=True)
        if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
            raise ValueError(f"{path} is not an NNx checkpoint ({CHECKPOINT_FORMAT})")
        idp = payload.get("idp")
        return cls(
            tag=payload["tag"], epoch=payload["epoch"], run_id=payload["run_id"],
            state_dict=payload["state_dict"], model=payload["model"], net=payload["net"],
            train=payload["train"],
            idp=None if idp is None else NNIterationDataPoint.from_state(idp),
            named_monitor=payload.get("named_monitor", False),
            monitor_value=payload.get("monitor_value"),
            training_state_present=payload.get("training_state_present", False),
            reconstructible=payload.get("reconstructible", True),
            transforms=tuple(payload.get("transforms", ())), path=Path(path),
        )

    @classmethod
    def load(cls, run: str, type: Checkpoints | str = Checkpoints.LAST, map_location: Any = "cpu",
             *, root: str | os.PathLike[str] = "runs") -> NNCheckpoint:
        """The checkpoint ``type`` (a Checkpoints member or a tag) of run ``run``."""
        tag = type.value if isinstance(type, Checkpoints) else type
        path = Path(root) / run / "checkpoints" / f"{tag}.pt"
        if not path.is_file():
            raise FileNotFoundError(f"run {run} has no {tag} checkpoint ({path})")
        return cls.from_file(path, map_location=map_location)

    def load_training_state(self, map_location: Any = "cpu") -> dict[str, Any] | None:
        """The sidecar's training state, or None when the checkpoint carries none."""
        if self.path is None or not self.training_state_present:
            return None
        side = sidecar_path(self.path)
        if not side.is_file():
            raise FileNotFoundError(f"checkpoint {self.path} names training state {side}, "
                                    "which is missing")
        state: dict[str, Any] = torch.load(side, map_location=map_location, weights_only=False)
        return state
