"""RunSummary: what summarize_run returns, and how it reads (``text()``) and saves
(``state()``: plain data)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["RunSummary"]


@dataclass(frozen=True)
class RunSummary:
    """One run: its seed and parent as run.yaml records them, and one metric's validation
    value at each epoch's end (None where the epoch was not validated)."""

    run_id: str
    seed: int | None
    parent_run_id: str | None
    metric: str
    epochs: tuple[int, ...]
    values: tuple[float | None, ...]

    @property
    def last(self) -> float | None:
        """The value at the last epoch (None without one)."""
        return self.values[-1] if self.values else None

    def state(self) -> dict[str, Any]:
        return {**asdict(self), "epochs": list(self.epochs), "values": list(self.values)}

    def text(self) -> str:
        head = f"run {self.run_id} (seed {self.seed}"
        head += f", parent {self.parent_run_id})" if self.parent_run_id else ")"
        rows = [f"  epoch {epoch}: val.{self.metric} = {'-' if v is None else f'{v:.6g}'}"
                for epoch, v in zip(self.epochs, self.values, strict=True)]
        return "\n".join([head, *rows]) + "\n"
