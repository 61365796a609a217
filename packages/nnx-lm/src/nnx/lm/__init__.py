"""Language models (spec §15): TransformerNN, NNTransformerParams, tokenizers, GenerativeNNModel.

The top-level names (``from nnx import TransformerNN``) and ``Nets.TRANSFORMER``
reach nnx-core through this distribution's entry points, not through this module.
"""

from nnx.lm.generative import GenerativeNNModel
from nnx.lm.layers import RMSNorm, RoPE
from nnx.lm.net import TRANSFORMER, KVCache, TransformerNN
from nnx.lm.params import NNTransformerParams, NNTransformerParamsBuilder
from nnx.lm.tokenizer import NNTokenizerParams

__all__ = [
    "TRANSFORMER",
    "GenerativeNNModel",
    "KVCache",
    "NNTokenizerParams",
    "NNTransformerParams",
    "NNTransformerParamsBuilder",
    "RMSNorm",
    "RoPE",
    "TransformerNN",
]
