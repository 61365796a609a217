"""NNx: config-addressed PyTorch training with crash-safe, bit-exact resume.

Top-level names are imported lazily: ``import nnx`` loads no submodule, no
add-on and no optional dependency. Core names resolve from the table below;
names an add-on provides resolve through the ``nnx.exports`` entry-point
group. A name whose distribution is missing names what to install: ``from nnx
import X`` raises :class:`~nnx._foundation.plugins.MissingDistributionError` (an
ImportError), ``nnx.X`` its twin
:class:`~nnx._foundation.plugins.MissingDistributionAttributeError` (an
AttributeError, so ``hasattr(nnx, "X")`` is False and ``getattr(nnx, "X", None)``
is None), both with the same message. ``import nnx.<sub>`` of a catalogued
subpackage whose distribution is missing (``nnx.search``, ``nnx.lm``, ...) raises
:class:`~nnx._foundation.plugins.MissingSubpackageError`, a ModuleNotFoundError
with the same hint.
"""

# Add-on distributions contribute nnx/<sub> directories to this package.
__path__ = __import__("pkgutil").extend_path(__path__, __name__)

import sys as _sys
from typing import TYPE_CHECKING, Any


class _MissingSubpackageFinder:
    """Last on ``sys.meta_path``: asked only after every real finder missed, so an
    installed add-on's ``nnx.<sub>`` never reaches it. For a subpackage the catalog
    knows, an import's miss becomes the install hint instead of a bare "No module
    named"; a probe (``importlib.util.find_spec("nnx.lm")``) still gets None."""

    nnx_missing_subpackages = True  # marks the finder, so a reload installs no second one

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname.startswith("nnx.") and fullname.count(".") == 1 and _importing():
            # Imported on a miss only: ``import nnx`` loads no submodule.
            from nnx._foundation.plugins import missing_subpackage

            err = missing_subpackage(fullname)
            if err is not None:
                raise err
        return None


def _importing() -> bool:
    """Whether the finder was asked by an import (``import`` / ``from ... import``,
    ``importlib.import_module``), which goes through importlib's
    ``_find_and_load_unlocked``, rather than by a probe such as
    ``importlib.util.find_spec``, whose answer for a missing module must stay None.
    Read from the caller frames (finder <- ``_find_spec`` <- the loader); where they
    cannot be read, a probe is assumed: the plain ModuleNotFoundError, no hint."""
    try:
        return _sys._getframe(3).f_code.co_name == "_find_and_load_unlocked"
    except (AttributeError, ValueError):
        return False


if not any(getattr(f, "nnx_missing_subpackages", False) for f in _sys.meta_path):
    _sys.meta_path.append(_MissingSubpackageFinder())

__version__ = "0.1.0"

# The one list of core's top-level names: name -> the module it is read from. The
# TYPE_CHECKING block at the end is generated from it (tools/gen_exports.py; CI checks).
_CORE_EXPORTS: dict[str, str] = {
    # configuration
    "NNParams": "nnx.params.net",
    "NNConvParams": "nnx.params.conv",
    "NNViTParams": "nnx.params.vit",
    "NNMoEParams": "nnx.params.moe",
    "NNModelParams": "nnx.params.model",
    "NNOptimParams": "nnx.params.optim",
    "NNParamGroupSpec": "nnx.params.optim",
    "NNOptimParamsBuilder": "nnx.params.optim",
    "NNOptimFactoryParams": "nnx.params.optim_factory",
    "OptimizerFactorySpec": "nnx.params.optim_factory",
    "NNSchedulerParams": "nnx.params.scheduler",
    "NNSchedulerParamsBuilder": "nnx.params.scheduler",
    "NNTrainParams": "nnx.params.train",
    "NNTrainerParams": "nnx.params.trainer",
    "NNTrainerParamsBuilder": "nnx.params.trainer",
    "TaskSpec": "nnx.params.task",
    "MetricSpec": "nnx.params.metric",
    "MonitorSpec": "nnx.params.monitor",
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
    "build_optimizer": "nnx._engine.optimizers",
    "build_param_groups": "nnx._engine.optimizers",
    "register_optimizer_factory": "nnx._engine.optimizer_factories",
    "registered_optimizer_factories": "nnx._engine.optimizer_factories",
    "unregister_optimizer_factory": "nnx._engine.optimizer_factories",
    # models beyond the Nets enum (§3.2)
    "ModelSpec": "nnx.models",
    "RuntimeModule": "nnx.models",
    "register_model_factory": "nnx.models",
    "registered_model_factories": "nnx.models",
    "unregister_model_factory": "nnx.models",
    "MissingModelFactoryError": "nnx.models",
    # topology-transform recipes (§4.2)
    "TransformRecipe": "nnx.transforms",
    "TransformCompatibilityError": "nnx.transforms",
    "register_transform": "nnx.transforms",
    "registered_transforms": "nnx.transforms",
    "unregister_transform": "nnx.transforms",
    "BatchAdapter": "nnx._contracts.batch_adapters",
    "PositionalInputs": "nnx._contracts.batch_adapters",
    "KeywordInputs": "nnx._contracts.batch_adapters",
    "LinearWarmupDecayLR": "nnx.enums._lr_schedules",
    "run_id": "nnx._foundation.identity",
    "MissingDistributionAttributeError": "nnx._foundation.plugins",
    "MissingDistributionError": "nnx._foundation.plugins",
    "MissingSubpackageError": "nnx._foundation.plugins",
    # built-in nets
    "FeedFwdNN": "nnx.nets.feedforward",
    "ConvNN": "nnx.nets.conv",
    "ViTNN": "nnx.nets.vit",
    "MoEFeedFwdNN": "nnx.nets.moe",
    "MoELinear": "nnx.nets.moe",
    # training, runs and checkpoints
    "NNModel": "nnx._surface.model",
    "NNRun": "nnx._persistence.run",
    "DamagedRun": "nnx._persistence.run",
    "RunDamagedError": "nnx._persistence.run",
    "NNCheckpoint": "nnx._persistence.checkpoint",
    "CheckpointReadError": "nnx._persistence.read_errors",
    "NNEvaluationDataPoint": "nnx._foundation.records",
    "NNIterationDataPoint": "nnx._foundation.records",
    "RunExistsError": "nnx._engine.training",
    "RunLeaseError": "nnx._engine.training",
    "ResumePointError": "nnx._persistence.point_manifest",
    "ResumeStatus": "nnx._persistence.resume_status",
    "ComponentSpec": "nnx._contracts.components",
    "ComponentRestoreError": "nnx._contracts.components",
    "Callback": "nnx.callbacks.base",
    "CallbackContext": "nnx.callbacks.base",
    "EarlyStopping": "nnx.callbacks.early_stopping",
    "LRMonitor": "nnx.callbacks.lr_monitor",
    "ModelCheckpoint": "nnx.callbacks.model_checkpoint",
    "TensorBoardCallback": "nnx.callbacks.tensorboard",
    "WandbCallback": "nnx.callbacks.wandb",
    "Trainer": "nnx._surface.trainer",
    "TrainerStepContext": "nnx._surface.trainer",
    "Objective": "nnx.objectives",
    "ObjectiveContext": "nnx.objectives",
    "ObjectiveResult": "nnx.objectives",
    "LossTerm": "nnx.objectives",
    "UpdateEvent": "nnx.objectives",
    "supervised_objective": "nnx.objectives",
    "kd_objective": "nnx.objectives",
    "TrainStepContext": "nnx._engine.steps",
    "EvalStepContext": "nnx._engine.steps",
    "default_train_step": "nnx._engine.steps",
    "ScheduleExhaustedError": "nnx._engine.schedule",
    "TaskValidationError": "nnx.tasks.adapters",
    "register_metric": "nnx.metrics.registry",
    "registered_metrics": "nnx.metrics.registry",
    "unregister_metric": "nnx.metrics.registry",
    "MonitorRecord": "nnx._foundation.records",
    "MonitorUnavailableError": "nnx._contracts.monitors",
    "NonFiniteRunError": "nnx._engine.nonfinite",
    "ProbabilitySpec": "nnx._engine.prediction",
    "PredictionResult": "nnx._engine.prediction",
    "PredictResult": "nnx._engine.prediction",
    "prediction_from_logits": "nnx._engine.prediction",
    "freeze": "nnx._engine.finetune",
    "unfreeze": "nnx._engine.finetune",
    "frozen": "nnx._engine.finetune",
    "load_pretrained": "nnx._engine.finetune",
    "set_seed": "nnx._foundation.seeding",
    "dataloader_worker_init_fn": "nnx._foundation.seeding",
    "NNDataset": "nnx.datasets.dataset",
    "NNTabularDataset": "nnx.datasets.tabular",
}

__all__ = sorted(_CORE_EXPORTS)


def __getattr__(name: str) -> Any:
    import importlib

    module = _CORE_EXPORTS.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
    else:
        # Imported on first use, not at module level: ``import nnx`` loads no submodule
        # (the contract in this module's docstring), and most names never reach here.
        from nnx._foundation.plugins import for_module_access, missing, registry

        value = registry("nnx.exports").get(name)
        if value is None:
            err = missing("export", name, f"nnx.{name}")
            if err is not None:  # ImportError for ``from nnx import``, else AttributeError
                raise for_module_access(err)
            raise AttributeError(f"module 'nnx' has no attribute {name!r}")
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    # Installed add-ons' names come from their nnx.exports entry points: reading the
    # metadata imports no add-on. Imported here so ``import nnx`` loads no submodule.
    from nnx._foundation.plugins import registry

    return sorted(set(globals()) | set(_CORE_EXPORTS) | registry("nnx.exports").names())


if TYPE_CHECKING:
    # GENERATED by tools/gen_exports.py from _CORE_EXPORTS above (CI runs it with
    # --check): the names for type checkers; runtime resolution is lazy, above.
    from nnx._contracts.batch_adapters import BatchAdapter as BatchAdapter
    from nnx._contracts.batch_adapters import KeywordInputs as KeywordInputs
    from nnx._contracts.batch_adapters import PositionalInputs as PositionalInputs
    from nnx._contracts.components import ComponentRestoreError as ComponentRestoreError
    from nnx._contracts.components import ComponentSpec as ComponentSpec
    from nnx._contracts.monitors import MonitorUnavailableError as MonitorUnavailableError
    from nnx._engine.finetune import freeze as freeze
    from nnx._engine.finetune import frozen as frozen
    from nnx._engine.finetune import load_pretrained as load_pretrained
    from nnx._engine.finetune import unfreeze as unfreeze
    from nnx._engine.nonfinite import NonFiniteRunError as NonFiniteRunError
    from nnx._engine.optimizer_factories import (
        register_optimizer_factory as register_optimizer_factory,
    )
    from nnx._engine.optimizer_factories import (
        registered_optimizer_factories as registered_optimizer_factories,
    )
    from nnx._engine.optimizer_factories import (
        unregister_optimizer_factory as unregister_optimizer_factory,
    )
    from nnx._engine.optimizers import build_optimizer as build_optimizer
    from nnx._engine.optimizers import build_param_groups as build_param_groups
    from nnx._engine.prediction import PredictionResult as PredictionResult
    from nnx._engine.prediction import PredictResult as PredictResult
    from nnx._engine.prediction import ProbabilitySpec as ProbabilitySpec
    from nnx._engine.prediction import prediction_from_logits as prediction_from_logits
    from nnx._engine.schedule import ScheduleExhaustedError as ScheduleExhaustedError
    from nnx._engine.steps import EvalStepContext as EvalStepContext
    from nnx._engine.steps import TrainStepContext as TrainStepContext
    from nnx._engine.steps import default_train_step as default_train_step
    from nnx._engine.training import RunExistsError as RunExistsError
    from nnx._engine.training import RunLeaseError as RunLeaseError
    from nnx._foundation.identity import run_id as run_id
    from nnx._foundation.plugins import (
        MissingDistributionAttributeError as MissingDistributionAttributeError,
    )
    from nnx._foundation.plugins import MissingDistributionError as MissingDistributionError
    from nnx._foundation.plugins import MissingSubpackageError as MissingSubpackageError
    from nnx._foundation.records import MonitorRecord as MonitorRecord
    from nnx._foundation.records import NNEvaluationDataPoint as NNEvaluationDataPoint
    from nnx._foundation.records import NNIterationDataPoint as NNIterationDataPoint
    from nnx._foundation.seeding import dataloader_worker_init_fn as dataloader_worker_init_fn
    from nnx._foundation.seeding import set_seed as set_seed
    from nnx._persistence.checkpoint import NNCheckpoint as NNCheckpoint
    from nnx._persistence.point_manifest import ResumePointError as ResumePointError
    from nnx._persistence.read_errors import CheckpointReadError as CheckpointReadError
    from nnx._persistence.resume_status import ResumeStatus as ResumeStatus
    from nnx._persistence.run import DamagedRun as DamagedRun
    from nnx._persistence.run import NNRun as NNRun
    from nnx._persistence.run import RunDamagedError as RunDamagedError
    from nnx._surface.model import NNModel as NNModel
    from nnx._surface.trainer import Trainer as Trainer
    from nnx._surface.trainer import TrainerStepContext as TrainerStepContext
    from nnx.callbacks.base import Callback as Callback
    from nnx.callbacks.base import CallbackContext as CallbackContext
    from nnx.callbacks.early_stopping import EarlyStopping as EarlyStopping
    from nnx.callbacks.lr_monitor import LRMonitor as LRMonitor
    from nnx.callbacks.model_checkpoint import ModelCheckpoint as ModelCheckpoint
    from nnx.callbacks.tensorboard import TensorBoardCallback as TensorBoardCallback
    from nnx.callbacks.wandb import WandbCallback as WandbCallback
    from nnx.datasets.dataset import NNDataset as NNDataset
    from nnx.datasets.tabular import NNTabularDataset as NNTabularDataset
    from nnx.enums._lr_schedules import LinearWarmupDecayLR as LinearWarmupDecayLR
    from nnx.enums.activations import Activations as Activations
    from nnx.enums.checkpoints import Checkpoints as Checkpoints
    from nnx.enums.devices import Devices as Devices
    from nnx.enums.losses import Losses as Losses
    from nnx.enums.nets import NetRegistration as NetRegistration
    from nnx.enums.nets import Nets as Nets
    from nnx.enums.optims import Optims as Optims
    from nnx.enums.precision import Precision as Precision
    from nnx.enums.schedulers import Schedulers as Schedulers
    from nnx.metrics.registry import register_metric as register_metric
    from nnx.metrics.registry import registered_metrics as registered_metrics
    from nnx.metrics.registry import unregister_metric as unregister_metric
    from nnx.models import MissingModelFactoryError as MissingModelFactoryError
    from nnx.models import ModelSpec as ModelSpec
    from nnx.models import RuntimeModule as RuntimeModule
    from nnx.models import register_model_factory as register_model_factory
    from nnx.models import registered_model_factories as registered_model_factories
    from nnx.models import unregister_model_factory as unregister_model_factory
    from nnx.nets.conv import ConvNN as ConvNN
    from nnx.nets.feedforward import FeedFwdNN as FeedFwdNN
    from nnx.nets.moe import MoEFeedFwdNN as MoEFeedFwdNN
    from nnx.nets.moe import MoELinear as MoELinear
    from nnx.nets.vit import ViTNN as ViTNN
    from nnx.objectives import LossTerm as LossTerm
    from nnx.objectives import Objective as Objective
    from nnx.objectives import ObjectiveContext as ObjectiveContext
    from nnx.objectives import ObjectiveResult as ObjectiveResult
    from nnx.objectives import UpdateEvent as UpdateEvent
    from nnx.objectives import kd_objective as kd_objective
    from nnx.objectives import supervised_objective as supervised_objective
    from nnx.params.conv import NNConvParams as NNConvParams
    from nnx.params.metric import MetricSpec as MetricSpec
    from nnx.params.model import NNModelParams as NNModelParams
    from nnx.params.moe import NNMoEParams as NNMoEParams
    from nnx.params.monitor import MonitorSpec as MonitorSpec
    from nnx.params.net import NNParams as NNParams
    from nnx.params.optim import NNOptimParams as NNOptimParams
    from nnx.params.optim import NNOptimParamsBuilder as NNOptimParamsBuilder
    from nnx.params.optim import NNParamGroupSpec as NNParamGroupSpec
    from nnx.params.optim_factory import NNOptimFactoryParams as NNOptimFactoryParams
    from nnx.params.optim_factory import OptimizerFactorySpec as OptimizerFactorySpec
    from nnx.params.scheduler import NNSchedulerParams as NNSchedulerParams
    from nnx.params.scheduler import NNSchedulerParamsBuilder as NNSchedulerParamsBuilder
    from nnx.params.task import TaskSpec as TaskSpec
    from nnx.params.train import NNTrainParams as NNTrainParams
    from nnx.params.trainer import NNTrainerParams as NNTrainerParams
    from nnx.params.trainer import NNTrainerParamsBuilder as NNTrainerParamsBuilder
    from nnx.params.vit import NNViTParams as NNViTParams
    from nnx.tasks.adapters import TaskValidationError as TaskValidationError
    from nnx.transforms import TransformCompatibilityError as TransformCompatibilityError
    from nnx.transforms import TransformRecipe as TransformRecipe
    from nnx.transforms import register_transform as register_transform
    from nnx.transforms import registered_transforms as registered_transforms
    from nnx.transforms import unregister_transform as unregister_transform
