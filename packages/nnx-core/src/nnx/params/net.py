"""NNParams: the network's shape (dims, dropout, activation, heads)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from nnx._foundation.config_base import Params, always, enum_decoder, set_field
from nnx._foundation.validation import (
    PROBABILITY,
    check_count,
    check_counts,
    check_enum,
    check_optional_count,
    check_real,
)
from nnx.enums.activations import Activations
from nnx.enums.nets import Nets

__all__ = ["NNParams"]

_activation = enum_decoder(Activations)


def _activations(values: Any) -> Any:
    return None if values is None else tuple(_activation(v) for v in values)


def _floats(values: Any) -> Any:
    return None if values is None else tuple(values)


@dataclass(frozen=True, slots=True, kw_only=True)
class NNParams(Params):
    """Shape of a built-in net.

    ``hidden_dims`` lists the hidden layer widths; ``activation`` and
    ``dropout_prob`` apply to every hidden layer unless ``activations`` /
    ``dropout_probs`` give one value per hidden layer.
    """

    input_dim: int | None = always()
    output_dim: int = always()
    hidden_dims: tuple[int, ...] = always(())
    dropout_prob: float = always(0.0)
    activation: Activations = always(Activations.RELU)
    activations: tuple[Activations, ...] | None = None
    dropout_probs: tuple[float, ...] | None = None
    n_heads: int | None = None

    _DECODERS: ClassVar[Mapping[str, Any]] = {
        "activation": _activation,
        "activations": _activations,
        "dropout_probs": _floats,
        "hidden_dims": tuple,
    }

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Hook: check and normalize every field (``set_field``), raising on a bad one.

        A subclass overrides it and calls ``NNParams.validate(self)`` explicitly (a
        slotted dataclass breaks zero-argument ``super()``).
        """
        n = self.field_name
        set_field(self, "input_dim", check_count(n("input_dim"), self.input_dim))
        set_field(self, "output_dim", check_count(n("output_dim"), self.output_dim))
        set_field(self, "hidden_dims", check_counts(n("hidden_dims"), self.hidden_dims))
        set_field(
            self, "dropout_prob", check_real(n("dropout_prob"), self.dropout_prob, PROBABILITY)
        )
        set_field(self, "activation",
                  check_enum(n("activation"), self.activation, Activations))
        if self.activations is not None:
            acts = tuple(check_enum(f"{n('activations')}[{i}]", a, Activations)
                         for i, a in enumerate(self.activations))
            self._check_per_layer("activations", acts)
            set_field(self, "activations", acts)
        if self.dropout_probs is not None:
            probs = tuple(
                check_real(f"{n('dropout_probs')}[{i}]", p, PROBABILITY)
                for i, p in enumerate(self.dropout_probs)
            )
            self._check_per_layer("dropout_probs", probs)
            set_field(self, "dropout_probs", probs)
        set_field(self, "n_heads", check_optional_count(n("n_heads"), self.n_heads))

    #: Deprecated aliases (one release): override :meth:`validate`, call :meth:`field_name`.
    _validate = validate
    _name = Params.field_name

    def _check_per_layer(self, field: str, values: tuple[Any, ...]) -> None:
        if len(values) != len(self.hidden_dims):
            raise ValueError(
                f"{self.field_name(field)} must give one value per hidden layer "
                f"({len(self.hidden_dims)}); got {len(values)}"
            )

    def omit_from_state(self, name: str, value: Any) -> bool:
        # A per-layer list that only repeats the net-wide value carries nothing.
        if name == "activations" and value is not None:
            return all(a is self.activation for a in value)
        if name == "dropout_probs" and value is not None:
            return all(p == self.dropout_prob for p in value)
        return False

    @property
    def layer_activations(self) -> tuple[Activations, ...]:
        """The activation of each hidden layer."""
        return self.activations or (self.activation,) * len(self.hidden_dims)

    @property
    def layer_dropouts(self) -> tuple[float, ...]:
        """The dropout probability after each hidden layer."""
        return self.dropout_probs or (self.dropout_prob,) * len(self.hidden_dims)

    @staticmethod
    def resolve_from_state(state: Mapping[str, Any], net: Any = "FEED_FWD") -> NNParams:
        """Rebuild the params of ``net`` (a ``Nets`` member or its name) from state data."""
        member = net if isinstance(net, Nets) else Nets[net]
        cls = member.params_class
        if not (isinstance(cls, type) and issubclass(cls, NNParams)):
            raise TypeError(f"Nets.{member.name} is not configured by an NNParams subclass")
        return cls.from_state(state)
