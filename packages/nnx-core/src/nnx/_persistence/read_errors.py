"""A saved file that cannot be read back, named with the reason on one line.

Loaders never let a raw torch, safetensors or pickle message (several lines,
naming no file) reach the user: :class:`CheckpointReadError` names the
checkpoint and :func:`cause_line` states the underlying error on one line.
The run-level :class:`~nnx._persistence.run.RunDamagedError` states its cause
with the same helper.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["BUILD_FAILURES", "CheckpointReadError", "cause_line", "unbuildable"]

#: What torch raises for a saved configuration of absurd sizes: a size whose element
#: count overflows (``numel: integer multiplication overflow``), an int too large for C,
#: memory it cannot allocate.
BUILD_FAILURES = (RuntimeError, OverflowError, MemoryError)


def cause_line(exc: BaseException) -> str:
    """An underlying error on one line (torch's and YAML's run to several), capped."""
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    text = text if len(text) <= 200 else text[:197] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class CheckpointReadError(ValueError):
    """A checkpoint file exists but cannot be read back as an NNx checkpoint: ``path``
    and ``reason`` (the underlying error on one line) are both in the message.

    A file whose bytes its resume point's manifest does not vouch for raises
    :class:`~nnx._persistence.point_manifest.ResumePointError` instead.
    """

    def __init__(self, path: Path, reason: str) -> None:
        empty = path.is_file() and path.stat().st_size == 0
        self.path, self.reason = path, "empty file (0 bytes)" if empty else reason
        super().__init__(f"cannot read checkpoint {path.as_posix()}: {self.reason}")


def unbuildable(path: Path | None, what: str, exc: BaseException) -> ValueError:
    """The named error for a saved configuration whose net cannot be built (``exc`` one of
    :data:`BUILD_FAILURES`): :class:`CheckpointReadError` naming ``path``, the file that
    declared it, or for a checkpoint held in memory a ValueError naming ``what``."""
    reason = (f"the net its configuration declares cannot be built ({cause_line(exc)}); "
              "nothing was loaded")
    return CheckpointReadError(path, reason) if path is not None else ValueError(
        f"{what}: {reason}")
