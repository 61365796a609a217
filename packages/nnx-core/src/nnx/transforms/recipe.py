"""TransformRecipe: a versioned topology transform, recorded as data (spec §4.2).

A recipe names a transform op registered under ``(op, version)`` and the
JSON-like config it runs with. Like a ModelSpec it never holds code, so it
round-trips through run.yaml, the run id and every checkpoint format as a
plain ``{"op", "version", "config"}`` mapping, and reading one back needs
nothing registered (only replaying it does).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from nnx._foundation.hashing import canonical_bytes, plain
from nnx._foundation.validation import check_count, check_spec_config, check_spec_id

__all__ = ["TransformRecipe", "config_targets", "transform_states"]

_NO_CODE = ("register the transform with nnx.register_transform(op, version, materialize) and "
            "name it here by op and version")
_KEYS = {"op", "version", "config"}


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class TransformRecipe:
    """``TransformRecipe("nnx.low_rank", 1, {"targets": ["layers.0"], "rank": 2})``.

    ``config`` is stored read-only (lists become tuples); bump ``version``
    whenever the op builds another topology from the same config.
    """

    op: str
    version: int
    config: Mapping[str, Any] = field(default_factory=_empty)

    def __post_init__(self) -> None:
        check_spec_id("TransformRecipe", self.op, hint=_NO_CODE, field="op")
        # Frozen dataclass: normalized values go in through object.__setattr__.
        object.__setattr__(self, "version", check_count("TransformRecipe.version", self.version))
        object.__setattr__(self, "config",
                           check_spec_config("TransformRecipe", self.config, hint=_NO_CODE))

    @property
    def label(self) -> str:
        """``op@vN``: how errors and the registry name this recipe."""
        return f"{self.op}@v{self.version}"

    def state(self) -> dict[str, Any]:
        """``{"op": ..., "version": n, "config": {...}}`` as plain (picklable, YAML-safe) data."""
        return {"op": self.op, "version": self.version, "config": plain(self.config)}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> TransformRecipe:
        """The recipe a :meth:`state` mapping records; resolves nothing."""
        if not isinstance(state, Mapping):
            raise ValueError(f"a transform recipe state must be a mapping; got "
                             f"{type(state).__name__}")
        missing, unknown = sorted({"op", "version"} - set(state)), sorted(set(state) - _KEYS)
        if missing or unknown:
            raise ValueError(f"a transform recipe state needs 'op' and 'version' (optional "
                             f"'config'); missing {missing}, unknown {unknown}")
        return cls(state["op"], state["version"], state.get("config", {}))

    def __hash__(self) -> int:
        return hash(canonical_bytes(self.state()))

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        # Read-only mapping proxies do not pickle; the state rebuilds an equal recipe.
        return (TransformRecipe.from_state, (self.state(),))


def transform_states(model: Any) -> tuple[dict[str, Any], ...]:
    """The states of the topology-transform recipes the model materialized (§4.2)."""
    return tuple(dict(recipe.state()) for recipe in getattr(model, "transforms", ()))


def config_targets(label: str, config: Any, keys: Sequence[str]) -> tuple[str, ...]:
    """An op's ``config["targets"]``, validated: ``config`` a mapping with exactly
    ``keys``, and ``targets`` a non-empty list of distinct dotted module names.
    ValueError naming ``label`` (the op, ``"op@vN"``) otherwise; the one check every
    op on explicit targets shares (core's ``nnx.low_rank``, nnx-peft's adapters)."""
    if not isinstance(config, Mapping) or set(config) != set(keys):
        got = sorted(config) if isinstance(config, Mapping) else type(config).__name__
        named = [repr(k) for k in keys]
        raise ValueError(f"{label} config must have exactly {', '.join(named[:-1])} and "
                         f"{named[-1]}; got {got}")
    targets = config["targets"]
    if (isinstance(targets, (str, bytes)) or not isinstance(targets, Sequence) or not targets
            or not all(isinstance(t, str) and t for t in targets)):
        raise ValueError(f"{label} targets must be a non-empty list of dotted module names; "
                         f"got {targets!r}")
    repeated = sorted(t for t, n in Counter(targets).items() if n > 1)
    if repeated:
        raise ValueError(f"{label} names a target more than once: {repeated}")
    return tuple(targets)
