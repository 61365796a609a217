"""Hand-made observations for the summary, pairing and report tests."""

from __future__ import annotations

from typing import Any

from nnx.comparison import Metric, Observation

LOSS = Metric("loss", "min")


def obs(run: str, value: float | None, *, status: str = "completed", seed: int | None = None,
        config: str | None = "A", **fields: Any) -> Observation:
    fields.setdefault("split", "val")
    fields.setdefault("selection", "last")
    return Observation(run_id=run, attempt_id=f"{run}-attempt", metric=fields.pop("metric", LOSS),
                       value=value, status=status, config=config,
                       replicate=None if seed is None else f"seed={seed}", **fields)


def side(config: str, values: list[float], *, seeds: list[int] | None = None) -> list[Observation]:
    seeds = list(range(len(values))) if seeds is None else seeds
    return [obs(f"{config}{s}", v, seed=s, config=config)
            for s, v in zip(seeds, values, strict=True)]
