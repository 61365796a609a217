"""Configuration objects: frozen, kw-only, slotted dataclasses with state()/from_state()."""

from nnx.params.conv import NNConvParams
from nnx.params.model import NNModelParams
from nnx.params.moe import NNMoEParams
from nnx.params.net import NNParams
from nnx.params.optim import NNOptimParams, NNParamGroupSpec
from nnx.params.optim_builder import NNOptimParamsBuilder
from nnx.params.optim_factory import NNOptimFactoryParams, OptimizerFactorySpec
from nnx.params.scheduler import NNSchedulerParams
from nnx.params.scheduler_builder import NNSchedulerParamsBuilder
from nnx.params.train import NNTrainParams
from nnx.params.trainer import NNTrainerParams
from nnx.params.trainer_builder import NNTrainerParamsBuilder
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
