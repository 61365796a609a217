"""NNx: config-addressed PyTorch training with crash-safe, bit-exact resume.

Top-level names are imported lazily: ``import nnx`` loads no submodule, no
add-on and no optional dependency. Core names resolve from the table below;
names an add-on provides resolve through the ``nnx.exports`` entry-point
group, and a name whose distribution is missing raises
:class:`nnx.plugins.MissingDistributionError` naming what to install.
"""

# Add-on distributions contribute nnx/<sub> directories to this package.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_CORE_EXPORTS: dict[str, str] = {
    # configuration
    "NNParams": "nnx.params.net",
    "NNConvParams": "nnx.params.conv",
    "NNViTParams": "nnx.params.vit",
    "NNMoEParams": "nnx.params.moe",
    "NNModelParams": "nnx.params.model",
    "NNOptimParams": "nnx.params.optim",
    "NNParamGroupSpec": "nnx.params.optim",
    "NNOptimParamsBuilder": "nnx.params.optim_builder",
    "NNSchedulerParams": "nnx.params.scheduler",
    "NNSchedulerParamsBuilder": "nnx.params.scheduler_builder",
    "NNTrainParams": "nnx.params.train",
    "NNTrainerParams": "nnx.params.trainer",
    "NNTrainerParamsBuilder": "nnx.params.trainer_builder",
    "TaskSpec": "nnx.tasks.spec",
    # enums-as-factories
    "Activations": "nnx.enums.activations",
    "Checkpoints": "nnx.enums.checkpoints",
    "Devices": "nnx.enums.devices",
    "Losses": "nnx.enums.losses",
    "Nets": "nnx.enums.nets",
    "NetRegistration": "nnx.enums.nets",
    "Optims": "nnx.enums.optims",
    "Precision": "nnx.enums.precision",
    "Schedulers": "nnx.enums.schedulers",
    # optimizers, identity, plugins
    "build_optimizer": "nnx.optimizers",
    "build_param_groups": "nnx.optimizers",
    "LinearWarmupDecayLR": "nnx.lr_schedules",
    "run_id": "nnx.identity",
    "MissingDistributionError": "nnx.plugins",
    # built-in nets
    "FeedFwdNN": "nnx.nets.feedforward",
    "ConvNN": "nnx.nets.conv",
    "ViTNN": "nnx.nets.vit",
    "MoEFeedFwdNN": "nnx.nets.moe",
    "MoELinear": "nnx.nets.moe",
}

__all__ = sorted(_CORE_EXPORTS)


def __getattr__(name: str) -> Any:
    import importlib

    module = _CORE_EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    else:
        from nnx.plugins import missing, registry

        value = registry("nnx.exports").get(name)
        if value is None:
            err = missing("export", name, f"nnx.{name}")
            if err is not None:
                raise err
            raise AttributeError(f"module 'nnx' has no attribute {name!r}")
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_CORE_EXPORTS))


if TYPE_CHECKING:
    # Explicit re-exports for type checkers (runtime resolution is lazy, above).
    from nnx.enums.activations import Activations as Activations
    from nnx.enums.checkpoints import Checkpoints as Checkpoints
    from nnx.enums.devices import Devices as Devices
    from nnx.enums.losses import Losses as Losses
    from nnx.enums.nets import NetRegistration as NetRegistration
    from nnx.enums.nets import Nets as Nets
    from nnx.enums.optims import Optims as Optims
    from nnx.enums.precision import Precision as Precision
    from nnx.enums.schedulers import Schedulers as Schedulers
    from nnx.identity import run_id as run_id
    from nnx.lr_schedules import LinearWarmupDecayLR as LinearWarmupDecayLR
    from nnx.nets.conv import ConvNN as ConvNN
    from nnx.nets.feedforward import FeedFwdNN as FeedFwdNN
    from nnx.nets.moe import MoEFeedFwdNN as MoEFeedFwdNN
    from nnx.nets.moe import MoELinear as MoELinear
    from nnx.nets.vit import ViTNN as ViTNN
    from nnx.optimizers import build_optimizer as build_optimizer
    from nnx.optimizers import build_param_groups as build_param_groups
    from nnx.params.conv import NNConvParams as NNConvParams
    from nnx.params.model import NNModelParams as NNModelParams
    from nnx.params.moe import NNMoEParams as NNMoEParams
    from nnx.params.net import NNParams as NNParams
    from nnx.params.optim import NNOptimParams as NNOptimParams
    from nnx.params.optim import NNParamGroupSpec as NNParamGroupSpec
    from nnx.params.optim_builder import NNOptimParamsBuilder as NNOptimParamsBuilder
    from nnx.params.scheduler import NNSchedulerParams as NNSchedulerParams
    from nnx.params.scheduler_builder import NNSchedulerParamsBuilder as NNSchedulerParamsBuilder
    from nnx.params.train import NNTrainParams as NNTrainParams
    from nnx.params.trainer import NNTrainerParams as NNTrainerParams
    from nnx.params.trainer_builder import NNTrainerParamsBuilder as NNTrainerParamsBuilder
    from nnx.params.vit import NNViTParams as NNViTParams
    from nnx.plugins import MissingDistributionError as MissingDistributionError
    from nnx.tasks.spec import TaskSpec as TaskSpec
