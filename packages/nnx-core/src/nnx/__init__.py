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
    from nnx.enums.activations import Activations
    from nnx.enums.checkpoints import Checkpoints
    from nnx.enums.devices import Devices
    from nnx.enums.losses import Losses
    from nnx.enums.nets import NetRegistration, Nets
    from nnx.enums.optims import Optims
    from nnx.enums.precision import Precision
    from nnx.enums.schedulers import Schedulers
    from nnx.identity import run_id
    from nnx.lr_schedules import LinearWarmupDecayLR
    from nnx.nets.conv import ConvNN
    from nnx.nets.feedforward import FeedFwdNN
    from nnx.nets.moe import MoEFeedFwdNN, MoELinear
    from nnx.nets.vit import ViTNN
    from nnx.optimizers import build_optimizer, build_param_groups
    from nnx.params.conv import NNConvParams
    from nnx.params.model import NNModelParams
    from nnx.params.moe import NNMoEParams
    from nnx.params.net import NNParams
    from nnx.params.optim import NNOptimParams, NNParamGroupSpec
    from nnx.params.optim_builder import NNOptimParamsBuilder
    from nnx.params.scheduler import NNSchedulerParams
    from nnx.params.scheduler_builder import NNSchedulerParamsBuilder
    from nnx.params.train import NNTrainParams
    from nnx.params.trainer import NNTrainerParams
    from nnx.params.trainer_builder import NNTrainerParamsBuilder
    from nnx.params.vit import NNViTParams
    from nnx.plugins import MissingDistributionError
    from nnx.tasks.spec import TaskSpec
