"""Checkpoint tags: ``Checkpoints.BEST()`` → ``"best.pt"``; with a run dir, its path."""

from __future__ import annotations

import enum
import os


class Checkpoints(enum.Enum):
    FIRST = "first"
    Q1 = "q1"
    Q2 = "q2"
    Q3 = "q3"
    LAST = "last"
    BEST = "best"

    def __call__(self, run_dir: str | os.PathLike[str] | None = None) -> str:
        name = f"{self.value}.pt"
        if run_dir is None:
            return name
        return os.path.join(os.fspath(run_dir), "checkpoints", name).replace(os.sep, "/")
