"""What a run's start restored (spec §14.1): the ``resume`` entry of metadata.yaml.

It lives in persistence, beside the run that stores it, so that reading a run back
(``NNRun.load``) needs nothing from the engine that planned the resume.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ResumeStatus"]


@dataclass
class ResumeStatus:
    """What a run's start restored; stored in metadata.yaml under ``resume``."""

    mode: str = "fresh"  # "fresh", "stateful" or "weights_only"
    source_run: str | None = None
    source_checkpoint: str | None = None
    source_epoch: int | None = None
    source_generation: int | None = None
    source_checkpoint_id: str | None = None
    restored_components: list[str] = field(default_factory=list)
    fresh_components: list[str] = field(default_factory=list)

    def state(self) -> dict[str, Any]:
        return {"mode": self.mode, "source_run": self.source_run,
                "source_checkpoint": self.source_checkpoint, "source_epoch": self.source_epoch,
                "source_generation": self.source_generation,
                "source_checkpoint_id": self.source_checkpoint_id,
                "restored_components": list(self.restored_components),
                "fresh_components": list(self.fresh_components)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> ResumeStatus:
        return cls(**dict(state))
