"""NNOptimParams and NNParamGroupSpec: the optimizer, its clipping, accumulation and groups.

:class:`NNOptimParamsBuilder` is its variant-gated builder (spec §2.4): variant methods
(adam, adam_amsgrad, adamw, sgd, sgd_nesterov) write exactly their fields; the last
variant wins. Modifiers (grad_clip, accumulate_grad, param_groups) survive a variant
change. Setters mutate and return the same builder; ``copy()`` branches it;
``build()`` validates.
"""

from __future__ import annotations

import copy as _copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from nnx._foundation.config_base import Params, always, enum_decoder, require_exact, set_field
from nnx._foundation.validation import (
    NON_NEGATIVE,
    POSITIVE,
    UNIT_HALF_OPEN,
    check_count,
    check_enum,
    check_optional_real,
    check_real,
)
from nnx.enums.optims import DEFAULT_EPS, Optims

__all__ = [
    "SHARED_OPTIM_DECODERS",
    "NNOptimParams",
    "NNOptimParamsBuilder",
    "NNParamGroupSpec",
    "check_shared_optim_fields",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class NNParamGroupSpec(Params):
    """One param-group rule: a glob over dotted parameter names and its overrides.

    ``lr`` sets the group's rate outright; ``lr_multiplier`` scales the
    optimizer's ``max_lr``; at most one of them. ``weight_decay`` overrides the
    optimizer's. Rules are matched in list order and the first match wins.
    """

    name_pattern: str = always()
    lr: float | None = None
    lr_multiplier: float | None = None
    weight_decay: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name_pattern, str) or not self.name_pattern:
            raise ValueError(
                f"NNParamGroupSpec.name_pattern must be a non-empty glob string; "
                f"got {self.name_pattern!r}"
            )
        # Zero is outside the domain: a group that should not train is frozen instead.
        freeze = ("; to keep a group from training, freeze it with nnx.finetune.freeze "
                  "(model.freeze(pattern)) rather than give it a zero rate")
        for name, unset in (("lr", "the optimizer's max_lr"),
                            ("lr_multiplier", "the optimizer's max_lr, unscaled")):
            try:
                value = check_optional_real(f"NNParamGroupSpec.{name}", getattr(self, name),
                                            POSITIVE, none_means=unset)
            except ValueError as exc:
                raise ValueError(f"{exc}{freeze}") from None
            set_field(self, name, value)
        set_field(self, "weight_decay", check_optional_real(
            "NNParamGroupSpec.weight_decay", self.weight_decay, NON_NEGATIVE,
            none_means="the optimizer's weight_decay"))
        if self.lr is not None and self.lr_multiplier is not None:
            raise ValueError(
                f"NNParamGroupSpec({self.name_pattern!r}): set lr or lr_multiplier, not both"
            )

    def resolve_lr(self, max_lr: float) -> float:
        """This group's learning rate under an optimizer whose base rate is ``max_lr``."""
        if self.lr is not None:
            return self.lr
        if self.lr_multiplier is not None:
            return max_lr * self.lr_multiplier
        return max_lr


def _momentum(value: Any) -> Any:
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(value)
    return value


def _groups(value: Any) -> Any:
    if value is None:
        return None
    return tuple(g if isinstance(g, NNParamGroupSpec) else NNParamGroupSpec.from_state(g)
                 for g in value)


#: Decoders for the fields every optimizer configuration shares.
SHARED_OPTIM_DECODERS: Mapping[str, Any] = {"param_groups": _groups}


def check_shared_optim_fields(obj: Any) -> None:
    """Validate and normalize the fields every optimizer configuration shares.

    ``max_lr``, ``weight_decay``, ``grad_clip_norm``, ``accumulate_grad_batches``
    and ``param_groups`` mean the same for a built-in optimizer and a registered
    factory, so both check them here, under their own class name.
    """
    n = f"{type(obj).__name__}."
    set_field(obj, "max_lr", check_real(f"{n}max_lr", obj.max_lr, NON_NEGATIVE))
    set_field(obj, "weight_decay",
              check_real(f"{n}weight_decay", obj.weight_decay, NON_NEGATIVE))
    set_field(obj, "grad_clip_norm", check_optional_real(
        f"{n}grad_clip_norm", obj.grad_clip_norm, POSITIVE, none_means="no clipping"))
    set_field(obj, "accumulate_grad_batches", check_count(
        f"{n}accumulate_grad_batches", obj.accumulate_grad_batches))
    if obj.param_groups is None:
        return
    if isinstance(obj.param_groups, (str, bytes, Mapping)) or not isinstance(
            obj.param_groups, Iterable):
        raise ValueError(f"{n}param_groups must be a list of NNParamGroupSpec, or None; "
                         f"got {obj.param_groups!r}")
    groups = tuple(obj.param_groups)
    if not groups:
        raise ValueError(f"{n}param_groups must hold at least one NNParamGroupSpec, or be None")
    for i, g in enumerate(groups):
        if not isinstance(g, NNParamGroupSpec):
            raise ValueError(f"{n}param_groups[{i}] must be an NNParamGroupSpec; got {g!r}")
    set_field(obj, "param_groups", groups)


@dataclass(frozen=True, slots=True, kw_only=True)
class NNOptimParams(Params):
    """A built-in optimizer's configuration.

    ``momentum`` is SGD's float momentum or the Adam family's ``(beta1, beta2)``
    pair (the field keeps its historical name; the builder takes ``betas=``).
    ``None`` means torch's default. ``eps`` applies to the Adam family only.
    """

    name: Optims = always(Optims.ADAM)
    max_lr: float = always(1e-3)
    momentum: float | tuple[float, float] | None = None
    weight_decay: float = always(0.0)
    eps: float | None = None
    grad_clip_norm: float | None = None
    accumulate_grad_batches: int = 1
    param_groups: tuple[NNParamGroupSpec, ...] | None = None

    _DECODERS: ClassVar[Mapping[str, Any]] = {
        "name": enum_decoder(Optims),
        **SHARED_OPTIM_DECODERS,
        "momentum": _momentum,
    }

    @classmethod
    def builder(cls) -> NNOptimParamsBuilder:
        return NNOptimParamsBuilder()

    def __post_init__(self) -> None:
        set_field(self, "name", check_enum("NNOptimParams.name", self.name, Optims))
        check_shared_optim_fields(self)
        set_field(self, "momentum", self._checked_momentum())
        if self.eps is not None and not self.name.is_adam_family:
            raise ValueError(
                f"NNOptimParams.eps applies to the Adam family; Optims.{self.name.name} has none"
            )
        set_field(self, "eps", check_optional_real(
            "NNOptimParams.eps", self.eps, POSITIVE, none_means="torch's 1e-8"))

    def _checked_momentum(self) -> float | tuple[float, float] | None:
        m = self.momentum
        if m is None:
            if self.name is Optims.SGD_NESTEROV:
                raise ValueError("NNOptimParams.momentum must be > 0 for Optims.SGD_NESTEROV")
            return None
        field = "NNOptimParams.momentum"
        if self.name.is_adam_family:
            if isinstance(m, (str, bytes)) or not isinstance(m, Sequence) or len(m) != 2:
                raise ValueError(
                    f"{field} for Optims.{self.name.name} must be the (beta1, beta2) pair, "
                    f"each in [0, 1); got {m!r}"
                )
            return (
                check_real(f"{field}[0] (beta1)", m[0], UNIT_HALF_OPEN),
                check_real(f"{field}[1] (beta2)", m[1], UNIT_HALF_OPEN),
            )
        if isinstance(m, Sequence) and not isinstance(m, str):
            raise ValueError(
                f"{field} for Optims.{self.name.name} is a float >= 0 (betas are Adam's); got {m!r}"
            )
        value = check_real(field, m, NON_NEGATIVE)
        if self.name is Optims.SGD_NESTEROV and value == 0:
            raise ValueError(f"{field} must be > 0 for Optims.SGD_NESTEROV; got {m!r}")
        return value


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
