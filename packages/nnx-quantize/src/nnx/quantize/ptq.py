"""Post-training int8 weight-only quantization (spec §16), through torchao's config API.

``quantize_int8(model)`` deep-copies ``model.net``, applies
``quantize_(copy, Int8WeightOnlyConfig())`` (every ``nn.Linear`` weight becomes a
per-output-channel symmetric int8 tensor with its float scales; activations and biases stay
in their float dtype) and returns a shallow copy of ``model`` whose only new attribute is
``net``: the same class, its params, loss, task, batch adapter and any subclass state
(a GenerativeNNModel's tokenizer and ``generate``) shared with the original, which is left
untouched. No calibration data, no retraining.
"""

from __future__ import annotations

import copy
from typing import TypeVar

from torch import nn

from nnx import NNModel
from nnx.extend import reload_blockers
from nnx.quantize.errors import QuantizeError

__all__ = ["quantize_int8"]

M = TypeVar("M", bound=NNModel)


def _quantized_already(net: nn.Module) -> bool:
    # torchao replaces a quantized Linear's weight by a tensor subclass of its own.
    return any(type(m.weight).__module__.startswith("torchao")
               for m in net.modules() if isinstance(m, nn.Linear))


def quantize_int8(model: M) -> M:
    """An instance of ``type(model)`` with only ``net`` replaced by its int8 weight-only
    quantized deep copy (``model`` itself unchanged). Refuses (:class:`QuantizeError`) a
    net without ``nn.Linear``, one already quantized, and one whose pruning masks or
    weight_norm / spectral_norm parametrizations would be quantized as their parts."""
    if not isinstance(model, NNModel):
        raise QuantizeError(f"quantize_int8 takes an NNModel; got {type(model).__name__}")
    net = model.net
    if not any(isinstance(m, nn.Linear) for m in net.modules()):
        raise QuantizeError(f"quantize_int8: {type(net).__name__} has no nn.Linear to quantize "
                            f"(int8 weight-only quantizes Linear weights only)")
    if _quantized_already(net):
        raise QuantizeError(f"quantize_int8: {type(net).__name__} is already quantized")
    blockers = reload_blockers(net)
    if blockers:
        raise QuantizeError(f"quantize_int8: remove these first ({'; '.join(blockers)}): "
                            f"the quantized copy would hold their parts, not the weights")
    # torchao is imported on use: importing nnx.quantize stays cheap.
    from torchao.quantization import Int8WeightOnlyConfig, quantize_

    quantized = copy.deepcopy(net)
    quantize_(quantized, Int8WeightOnlyConfig())
    result = copy.copy(model)  # same class and attributes; only net is rebound below
    result.net = quantized
    return result
