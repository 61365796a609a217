"""Configuration objects: frozen, kw-only, slotted dataclasses with state()/from_state()."""

from nnx.params.conv import NNConvParams
from nnx.params.model import NNModelParams
from nnx.params.moe import NNMoEParams
from nnx.params.net import NNParams
from nnx.params.optim import NNOptimParams, NNOptimParamsBuilder, NNParamGroupSpec
from nnx.params.optim_factory import NNOptimFactoryParams, OptimizerFactorySpec
from nnx.params.scheduler import NNSchedulerParams, NNSchedulerParamsBuilder
from nnx.params.train import NNTrainParams
from nnx.params.trainer import NNTrainerParams, NNTrainerParamsBuilder
from nnx.params.vit import NNViTParams

__all__ = [
    "NNConvParams",
    "NNMoEParams",
    "NNModelParams",
    "NNOptimFactoryParams",
    "NNOptimParams",
    "NNOptimParamsBuilder",
    "NNParamGroupSpec",
    "NNParams",
    "NNSchedulerParams",
    "NNSchedulerParamsBuilder",
    "NNTrainParams",
    "NNTrainerParams",
    "NNTrainerParamsBuilder",
    "NNViTParams",
    "OptimizerFactorySpec",
]
