"""Precision policies for NNModelParams.precision (FP32 / FP16 / BF16).

Besides the members' own spellings ("fp32", "fp16", "bf16", any case),
NNModelParams.precision takes Lightning's names of the same policies
(:data:`PRECISION_ALIASES`): "16-mixed" and "bf16-mixed" are autocast with
(FP16) or without (BF16) a loss scaler, which is what FP16 / BF16 are here.
Lightning's "16-true" / "bf16-true" (weights stored in half precision) are not
NNx policies and stay refused.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# torch is imported on first use, not at import: ``nnx runs show`` renders a run's typed
# configuration (these members) and must run without torch (docs/architecture.md).


class Precision(enum.Enum):
    FP32 = "fp32"
    FP16 = "fp16"
    BF16 = "bf16"

    def __call__(self) -> torch.dtype:
        import torch

        return {Precision.FP32: torch.float32, Precision.FP16: torch.float16,
                Precision.BF16: torch.bfloat16}[self]

    @property
    def is_reduced(self) -> bool:
        return self is not Precision.FP32


#: Lightning's spellings of the same policies (lowercase), accepted beside the members'.
PRECISION_ALIASES: dict[str, Precision] = {
    "16-mixed": Precision.FP16,
    "bf16-mixed": Precision.BF16,
    "32": Precision.FP32,
    "32-true": Precision.FP32,
}
