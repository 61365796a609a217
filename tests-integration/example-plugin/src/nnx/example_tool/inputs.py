"""What summarize_run is given, checked with nnx-core's one validator before any file is
read (a refusal changes nothing and names the argument)."""

from __future__ import annotations

from typing import Any

from nnx.extend import check_optional_str, check_run_id

__all__ = ["checked"]


def checked(run_id: Any, metric: Any) -> tuple[str, str]:
    """``(run_id, metric)``; ValueError naming the one that is not a run id / a name."""
    name = check_optional_str("metric", metric)
    if name is None:
        raise ValueError("metric must be a metric name such as 'loss'; got None")
    return check_run_id("run_id", run_id), name
