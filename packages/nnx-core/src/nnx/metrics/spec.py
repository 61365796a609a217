"""MetricSpec: a declared metric, named by its registered (id, version) and a config."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from types import MappingProxyType
from typing import Any

from nnx._hashing import canonical_bytes, plain
from nnx._validation import check_count, check_optional_str
from nnx.params._base import Params, always, empty_mapping, set_field

__all__ = ["MetricSpec"]


def _frozen(value: Any) -> Any:
    """Plain JSON-like data made read-only: mappings become proxies, lists tuples."""
    if isinstance(value, dict):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


@dataclass(frozen=True, slots=True)
class MetricSpec(Params):
    """A declared metric: ``MetricSpec("nll")`` or ``MetricSpec("f1", config={...})``.

    ``id`` and ``version`` name a metric registered with
    :func:`nnx.metrics.register_metric`; ``config`` is read-only JSON-like data
    handed to its factory (lists arrive as tuples, NumPy scalars as plain
    numbers); ``name`` is the key the value is reported under (the id by
    default). A spec never holds code, so it round-trips through ``state()``
    without the registration. Every field but ``id`` is keyword-only.
    """

    id: str = always()
    _: KW_ONLY
    version: int = always(1)
    config: Mapping[str, Any] = field(default_factory=empty_mapping)
    name: str | None = None

    def __post_init__(self) -> None:
        ident = self.id
        if not isinstance(ident, str) or not ident or "@" in ident or ident != ident.strip():
            raise ValueError(
                f"MetricSpec.id must be a non-empty string without '@' or surrounding "
                f"whitespace; got {self.id!r}"
            )
        set_field(self, "version", check_count("MetricSpec.version", self.version))
        if not isinstance(self.config, Mapping):
            raise ValueError(
                f"MetricSpec.config must be a mapping of JSON-like values; "
                f"got {type(self.config).__name__}"
            )
        try:
            data = plain(self.config, "MetricSpec.config")
        except TypeError as exc:  # a callable, an object, a non-string key …
            raise ValueError(f"{exc}; a MetricSpec never holds code") from None
        set_field(self, "config", _frozen(data))
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
