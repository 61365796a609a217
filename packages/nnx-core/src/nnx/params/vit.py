"""NNViTParams: a Vision Transformer over square images."""

from __future__ import annotations

from dataclasses import dataclass

from nnx._foundation.config_base import always, set_field
from nnx._foundation.validation import check_count
from nnx.params.net import NNParams

__all__ = ["NNViTParams"]


@dataclass(frozen=True, slots=True, kw_only=True)
class NNViTParams(NNParams):
    """ViTNN's shape: ``image_size`` / ``patch_size`` patches of ``in_channels``.

    ``input_dim`` is derived (``in_channels × image_size²``) when omitted;
    ``n_heads`` must divide ``d_model``. ``output_dim`` is the class count.
    """

    input_dim: int | None = None
    image_size: int = always(32)
    patch_size: int = always(4)
    in_channels: int = always(3)
    d_model: int = always(64)
    n_layers: int = always(2)
    ffn_mult: int = always(4)
    n_heads: int | None = always(4)

    def validate(self) -> None:
        n = self.field_name
        for field in ("image_size", "patch_size", "in_channels", "d_model", "n_layers", "ffn_mult"):
            set_field(self, field, check_count(n(field), getattr(self, field)))
        set_field(self, "n_heads", check_count(n("n_heads"), self.n_heads))
        derived = self.in_channels * self.image_size**2
        if self.input_dim is None:
            set_field(self, "input_dim", derived)
        NNParams.validate(self)
        if self.input_dim != derived:
            raise ValueError(
                f"{n('input_dim')} must equal in_channels × image_size² ({derived}) or be "
                f"omitted; got {self.input_dim}"
            )
        if self.image_size % self.patch_size:
            raise ValueError(
                f"{n('patch_size')} must divide image_size ({self.image_size}); got "
                f"{self.patch_size}"
            )
        assert self.n_heads is not None
        if self.d_model % self.n_heads:
            raise ValueError(
                f"{n('n_heads')} must divide d_model ({self.d_model}); got {self.n_heads}"
            )

    def omit_from_state(self, name: str, value: object) -> bool:
        if name == "input_dim":  # derived from the image shape, never configured
            return True
        return NNParams.omit_from_state(self, name, value)

    @property
    def n_patches(self) -> int:
        return (self.image_size // self.patch_size) ** 2
