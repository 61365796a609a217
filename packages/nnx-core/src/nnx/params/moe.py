"""NNMoEParams: a feed-forward net whose hidden layers are mixtures of experts."""

from __future__ import annotations

from dataclasses import dataclass

from nnx._foundation.config_base import always, set_field
from nnx._foundation.validation import NON_NEGATIVE, check_count, check_real
from nnx.params.net import NNParams

__all__ = ["NNMoEParams"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NNMoEParams(NNParams):
    """MoE feed-forward shape: each hidden layer routes to ``top_k`` of ``num_experts``.

    ``aux_loss_weight`` scales the Switch-style load-balancing loss a layer
    exposes as ``last_aux_loss``.
    """

    num_experts: int = always(4)
    top_k: int = always(2)
    aux_loss_weight: float = 0.01

    def validate(self) -> None:
        NNParams.validate(self)
        n = self.field_name
        set_field(self, "num_experts", check_count(n("num_experts"), self.num_experts, minimum=2))
        set_field(
            self,
            "top_k",
            check_count(n("top_k"), self.top_k, minimum=1, maximum=self.num_experts),
        )
        set_field(
            self,
            "aux_loss_weight",
            check_real(n("aux_loss_weight"), self.aux_loss_weight, NON_NEGATIVE),
        )
