"""Optimizers: ``Optims.ADAM(net=net, lr_start=1e-3)`` → ``torch.optim.Adam``.

ADAM / ADAM_AMSGRAD apply ``weight_decay`` as a coupled L2 term (added to the
gradient, then rescaled by Adam's denominator); ADAMW decays decoupled, scaling
each weight by ``1 - lr * weight_decay`` before the Adam update (spec §3.1).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

# torch is imported on first use, not at import: ``nnx runs show`` renders a run's typed
# configuration (these members) and must run without torch (docs/architecture.md).

#: torch's Adam defaults, used when a configuration leaves them unset.
DEFAULT_BETAS = (0.9, 0.999)
DEFAULT_EPS = 1e-8


class Optims(enum.Enum):
    ADAM = "adam"
    ADAM_AMSGRAD = "adam_amsgrad"
    ADAMW = "adamw"
    SGD = "sgd"
    SGD_NESTEROV = "sgd_nesterov"

    @property
    def is_adam_family(self) -> bool:
        return self in (Optims.ADAM, Optims.ADAM_AMSGRAD, Optims.ADAMW)

    def __call__(
        self,
        net: torch.nn.Module | Iterable[Any],
        *,
        lr_start: float = 1e-3,
        momentum: float | tuple[float, float] | None = None,
        weight_decay: float = 0.0,
        eps: float | None = None,
    ) -> torch.optim.Optimizer:
        """Build the optimizer over a module's parameters (or explicit params / groups)."""
        from torch import nn

        params = net.parameters() if isinstance(net, nn.Module) else net
        return self.build(
            params, lr=lr_start, momentum=momentum, weight_decay=weight_decay, eps=eps
        )

    def build(
        self,
        params: Iterable[Any],
        *,
        lr: float,
        momentum: float | tuple[float, float] | None,
        weight_decay: float,
        eps: float | None,
    ) -> torch.optim.Optimizer:
        """Construct the torch optimizer; per-group lr / weight_decay in ``params`` win."""
        import torch

        if self.is_adam_family:
            betas = DEFAULT_BETAS if momentum is None else momentum
            if not isinstance(betas, tuple):
                raise ValueError(f"Optims.{self.name} needs betas as a (beta1, beta2) pair")
            kwargs: dict[str, Any] = {
                "lr": lr,
                "betas": betas,
                "eps": DEFAULT_EPS if eps is None else eps,
                "weight_decay": weight_decay,
            }
            if self is Optims.ADAMW:
                return torch.optim.AdamW(params, **kwargs)
            return torch.optim.Adam(params, amsgrad=self is Optims.ADAM_AMSGRAD, **kwargs)
        if isinstance(momentum, tuple):
            raise ValueError(f"Optims.{self.name} takes a float momentum, not betas")
        return torch.optim.SGD(
            params,
            lr=lr,
            momentum=0.0 if momentum is None else momentum,
            weight_decay=weight_decay,
            nesterov=self is Optims.SGD_NESTEROV,
        )
