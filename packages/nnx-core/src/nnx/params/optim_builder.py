"""NNOptimParamsBuilder: variant-gated construction of NNOptimParams (spec §2.4).

Variant methods (adam, adam_amsgrad, adamw, sgd, sgd_nesterov) write exactly
their fields; the last variant wins. Modifiers (grad_clip, accumulate_grad,
param_groups) survive a variant change. Setters mutate and return the same
builder; ``copy()`` branches it; ``build()`` validates.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Iterable
from typing import Any

from nnx._foundation.config_base import require_exact
from nnx.enums.optims import DEFAULT_EPS, Optims
from nnx.params.optim import NNOptimParams, NNParamGroupSpec

__all__ = ["NNOptimParamsBuilder"]


class NNOptimParamsBuilder:
    """Fluent, branchable construction of :class:`NNOptimParams`."""

    def __init__(self) -> None:
        self._variant: dict[str, Any] | None = None
        self._grad_clip_norm: float | None = None
        self._accumulate: int = 1
        self._param_groups: list[NNParamGroupSpec] | None = None

    # -- variants ---------------------------------------------------------------
    def _adam_family(
        self, name: Optims, max_lr: float, betas: Any, weight_decay: float, eps: float | None
    ) -> NNOptimParamsBuilder:
        self._variant = {
            "name": name,
            "max_lr": max_lr,
            "momentum": None if betas is None else tuple(betas),
            "weight_decay": weight_decay,
            "eps": None if eps == DEFAULT_EPS else eps,
        }
        return self

    def adam(
        self, *, max_lr: float, betas: tuple[float, float] | None = None,
        weight_decay: float = 0.0, eps: float | None = None,
    ) -> NNOptimParamsBuilder:
        """Adam with coupled L2 weight decay."""
        return self._adam_family(Optims.ADAM, max_lr, betas, weight_decay, eps)

    def adam_amsgrad(
        self, *, max_lr: float, betas: tuple[float, float] | None = None,
        weight_decay: float = 0.0, eps: float | None = None,
    ) -> NNOptimParamsBuilder:
        """Adam with the AMSGrad maximum of past squared gradients."""
        return self._adam_family(Optims.ADAM_AMSGRAD, max_lr, betas, weight_decay, eps)

    def adamw(
        self, *, max_lr: float, betas: tuple[float, float] | None = None,
        weight_decay: float = 1e-2, eps: float | None = None,
    ) -> NNOptimParamsBuilder:
        """AdamW: decoupled decay; ``weight_decay`` defaults to torch's 1e-2."""
        return self._adam_family(Optims.ADAMW, max_lr, betas, weight_decay, eps)

    def _sgd_family(
        self, name: Optims, max_lr: float, momentum: float | None, weight_decay: float,
        eps: float | None,
    ) -> NNOptimParamsBuilder:
        if eps is not None and eps != DEFAULT_EPS:
            raise ValueError(f"Optims.{name.name} has no eps; got eps={eps!r}")
        self._variant = {
            "name": name, "max_lr": max_lr, "momentum": momentum, "weight_decay": weight_decay,
        }
        return self

    def sgd(
        self, *, max_lr: float, momentum: float | None = None, weight_decay: float = 0.0,
        eps: float | None = None,
    ) -> NNOptimParamsBuilder:
        """Plain SGD with optional momentum."""
        return self._sgd_family(Optims.SGD, max_lr, momentum, weight_decay, eps)

    def sgd_nesterov(
        self, *, max_lr: float, momentum: float, weight_decay: float = 0.0,
        eps: float | None = None,
    ) -> NNOptimParamsBuilder:
        """SGD with Nesterov momentum (momentum must be > 0)."""
        return self._sgd_family(Optims.SGD_NESTEROV, max_lr, momentum, weight_decay, eps)

    # -- modifiers --------------------------------------------------------------
    def grad_clip(self, norm: float | None) -> NNOptimParamsBuilder:
        """Clip the gradient norm to ``norm`` before each step (None disables)."""
        self._grad_clip_norm = norm
        return self

    def accumulate_grad(self, batches: int) -> NNOptimParamsBuilder:
        """Accumulate ``batches`` microbatches per optimizer update."""
        self._accumulate = batches
        return self

    def param_groups(self, specs: Iterable[NNParamGroupSpec] | None) -> NNOptimParamsBuilder:
        """Per-group rules, first match wins (the list is copied)."""
        self._param_groups = None if specs is None else list(specs)
        return self

    # -- branching --------------------------------------------------------------
    def copy(self) -> NNOptimParamsBuilder:
        """An independent branch: setters on either never affect the other."""
        twin = _copy.copy(self)
        twin._variant = None if self._variant is None else dict(self._variant)
        twin._param_groups = None if self._param_groups is None else list(self._param_groups)
        return twin

    @classmethod
    def from_params(cls, params: NNOptimParams) -> NNOptimParamsBuilder:
        """A builder pre-loaded so that ``from_params(p).build() == p``."""
        require_exact("NNOptimParamsBuilder", NNOptimParams, params)
        builder = cls()
        builder._variant = {
            "name": params.name,
            "max_lr": params.max_lr,
            "momentum": params.momentum,
            "weight_decay": params.weight_decay,
        }
        if params.eps is not None:
            builder._variant["eps"] = params.eps
        builder._grad_clip_norm = params.grad_clip_norm
        builder._accumulate = params.accumulate_grad_batches
        builder._param_groups = None if params.param_groups is None else list(params.param_groups)
        return builder

    def build(self) -> NNOptimParams:
        """Validate and return the immutable params value."""
        if self._variant is None:
            raise ValueError(
                "NNOptimParamsBuilder.build: choose a variant first "
                "(adam, adam_amsgrad, adamw, sgd or sgd_nesterov)"
            )
        variant = {k: v for k, v in self._variant.items() if v is not None or k == "momentum"}
        return NNOptimParams(
            **variant,
            grad_clip_norm=self._grad_clip_norm,
            accumulate_grad_batches=self._accumulate,
            param_groups=None if self._param_groups is None else tuple(self._param_groups),
        )
