"""SearchSpace: the parameters a search samples, by name, as Optuna distributions."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import optuna
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
    distribution_to_json,
)

from nnx.extend import canonical_bytes, frozen_mapping, sha256_hex

__all__ = ["SearchSpace"]


class SearchSpace(Mapping[str, BaseDistribution]):
    """``SearchSpace({"lr": FloatDistribution(1e-3, 1e-1, log=True), "width":
    IntDistribution(4, 32)})``: each name is sampled from its distribution and handed to
    ``apply(plan, params)``. Float, int and categorical distributions; a stored study
    records the space's :attr:`identity` and refuses another space."""

    def __init__(self, distributions: Mapping[str, BaseDistribution]) -> None:
        if isinstance(distributions, SearchSpace):
            distributions = dict(distributions.items())
        if not isinstance(distributions, Mapping) or not distributions:
            raise ValueError("a SearchSpace needs a non-empty mapping of parameter names to "
                             f"Optuna distributions; got {distributions!r}")
        for name, dist in distributions.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"a SearchSpace parameter name must be a non-empty str; "
                                 f"got {name!r}")
            if not isinstance(dist, (FloatDistribution, IntDistribution,
                                     CategoricalDistribution)):
                raise ValueError(
                    f"SearchSpace[{name!r}] must be an optuna FloatDistribution, "
                    f"IntDistribution or CategoricalDistribution; got {type(dist).__name__}")
        self._dists: Mapping[str, BaseDistribution] = frozen_mapping(
            dict(sorted(distributions.items())))
        # JSON of each distribution, as Optuna stores it: what a stored study compares.
        self._json = {name: distribution_to_json(d) for name, d in self._dists.items()}

    def __getitem__(self, name: str) -> BaseDistribution:
        return self._dists[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dists)

    def __len__(self) -> int:
        return len(self._dists)

    def __repr__(self) -> str:
        return f"SearchSpace({dict(self._dists)!r})"

    @property
    def identity(self) -> str:
        """SHA-256 of the canonical JSON of every distribution, by name."""
        return sha256_hex(canonical_bytes(self._json))

    def suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        """Each parameter through the trial's public ``suggest_*`` (the sampler decides)."""
        params: dict[str, Any] = {}
        for name, d in self._dists.items():
            if isinstance(d, FloatDistribution):
                params[name] = trial.suggest_float(name, d.low, d.high, step=d.step, log=d.log)
            elif isinstance(d, IntDistribution):
                params[name] = trial.suggest_int(name, d.low, d.high, step=d.step, log=d.log)
            elif isinstance(d, CategoricalDistribution):
                params[name] = trial.suggest_categorical(name, d.choices)
        return params
