"""MetricSpec: a declared metric, named by its registered (id, version) and a config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from nnx._foundation.config_base import Params, always, empty_mapping, set_field
from nnx._foundation.hashing import canonical_bytes
from nnx._foundation.validation import (
    check_count,
    check_optional_str,
    check_spec_config,
    check_spec_id,
)

__all__ = ["MetricSpec"]


@dataclass(frozen=True, slots=True)
class MetricSpec(Params):
    """A declared metric: ``MetricSpec("nll")``, ``MetricSpec("f1", 1, {...})``.

    ``id`` and ``version`` name a metric registered with
    :func:`nnx.metrics.register_metric`; ``config`` is read-only JSON-like data
    handed to its factory (lists arrive as tuples, NumPy scalars as plain
    numbers); ``name`` is the key the value is reported under (the id by
    default). A spec never holds code, so it round-trips through ``state()``
    without the registration. The fields are positional-or-keyword in the
    spec's order, ``MetricSpec(id, version=1, config={}, name=None)`` (§6.4).
    """

    id: str = always()
    version: int = always(1)
    config: Mapping[str, Any] = field(default_factory=empty_mapping)
    name: str | None = None

    def __post_init__(self) -> None:
        check_spec_id("MetricSpec", self.id)
        set_field(self, "version", check_count("MetricSpec.version", self.version))
        set_field(self, "config", check_spec_config("MetricSpec", self.config))
        set_field(self, "name", check_optional_str("MetricSpec.name", self.name))

    @property
    def label(self) -> str:
        """The key this metric is reported under: ``name``, or the id."""
        return self.name if self.name is not None else self.id

    def __hash__(self) -> int:
        return hash(canonical_bytes(self.state()))

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        # Read-only mapping proxies do not pickle; the state rebuilds an equal spec.
        return (MetricSpec.from_state, (self.state(),))
