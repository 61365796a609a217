"""NNOptimParams and NNParamGroupSpec: the optimizer, its clipping, accumulation and groups."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from nnx._foundation.config_base import Params, always, enum_decoder, set_field
from nnx._foundation.validation import (
    NON_NEGATIVE,
    POSITIVE,
    UNIT_HALF_OPEN,
    check_count,
    check_enum,
    check_optional_real,
    check_real,
)
from nnx.enums.optims import Optims

if TYPE_CHECKING:
    from nnx.params.optim_builder import NNOptimParamsBuilder

__all__ = [
    "SHARED_OPTIM_DECODERS",
    "NNOptimParams",
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
        from nnx.params.optim_builder import NNOptimParamsBuilder

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
