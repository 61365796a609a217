"""The 8da4w QAT configuration (spec §16) shared by the lifecycle and the legacy migration:
the ``nnx.qat`` op id, the config checks, torchao's base config and the prepare step."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from nnx.quantize.errors import QuantizeError

__all__ = ["QAT_CONFIGS", "QAT_OP", "QAT_VERSION", "base_config", "check_config",
           "prepare_qat"]

QAT_OP, QAT_VERSION = "nnx.qat", 1
QAT_CONFIGS = ("8da4w",)


def check_config(qat_config: Any, groupsize: Any) -> None:
    """QuantizeError unless ``qat_config`` is a known name and ``groupsize`` a positive int."""
    if qat_config not in QAT_CONFIGS:
        raise QuantizeError(f"qat_config must be one of {list(QAT_CONFIGS)}; got {qat_config!r}")
    if isinstance(groupsize, bool) or not isinstance(groupsize, int) or groupsize < 1:
        raise QuantizeError(f"groupsize must be a positive int; got {groupsize!r}")


def base_config(groupsize: int) -> Any:
    """torchao's 8da4w config: int8 dynamic activations, int4 weights per group."""
    # torchao is imported on use: importing nnx.quantize stays cheap.
    from torchao.quantization import Int8DynamicActivationIntxWeightConfig, PerGroup

    # torch's stubs omit the sub-byte dtypes torch.int1..int7 it has at runtime.
    return Int8DynamicActivationIntxWeightConfig(weight_dtype=torch.int4,  # type: ignore[attr-defined]
                                                 weight_granularity=PerGroup(groupsize))


def prepare_qat(net: nn.Module, groupsize: int, targets: list[str]) -> None:
    """Swap each target Linear for torchao's FakeQuantizedLinear (8da4w, ``groupsize``);
    it keeps the Linear's Parameters, so an optimizer built already trains them."""
    # torchao is imported on use: importing nnx.quantize stays cheap.
    from torchao.quantization import quantize_
    from torchao.quantization.qat import QATConfig

    wanted = set(targets)
    quantize_(net, QATConfig(base_config(groupsize), step="prepare"),
              filter_fn=lambda _m, fqn: fqn in wanted)
