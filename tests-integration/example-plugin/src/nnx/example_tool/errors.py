"""The named errors of nnx.example_tool: a run that cannot be summarized."""

from __future__ import annotations

__all__ = ["RunSummaryError"]


class RunSummaryError(ValueError):
    """No run of that id under the root, or a run.yaml that cannot be read."""
