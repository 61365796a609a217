"""nnx-quantize: make a trained model smaller (spec §16).

``quantize_int8(model)`` is post-training int8 weight-only quantization through torchao's
config API (``quantize_(net, Int8WeightOnlyConfig())``): one call, no calibration data,
an instance of the same class with only ``net`` replaced. Quantization-aware training
(8da4w) is ``qat_train_step_factory`` + ``QATLifecycleCallback`` (:mod:`nnx.quantize.qat`):
fake-quant during training, converted on commit, reloaded by ``NNModel.from_checkpoint``.
Pruning lives beside it in
:mod:`nnx.prune`. See docs/quantize.md.
"""

from nnx.quantize.errors import QuantizeError
from nnx.quantize.ptq import quantize_int8
from nnx.quantize.qat import QATLifecycleCallback, qat_train_step_factory
from nnx.quantize.qat_legacy import migrate_legacy_qat

__nnx_skeleton__ = {"kind": "training"}

__all__ = ["QATLifecycleCallback", "QuantizeError", "migrate_legacy_qat", "qat_train_step_factory",
           "quantize_int8"]
