"""Callbacks (spec §5): the bus and the built-in listeners.

TensorBoardCallback and WandbCallback check at construction that their extra
(``tensorboard`` / ``wandb``) is installed and import it only when a run
begins: importing this package never imports TensorBoard or W&B.
"""

from nnx.callbacks.base import Callback, CallbackContext, _CallbackContext
from nnx.callbacks.early_stopping import EarlyStopping
from nnx.callbacks.lr_monitor import LRMonitor
from nnx.callbacks.model_checkpoint import ModelCheckpoint
from nnx.callbacks.tensorboard import TensorBoardCallback
from nnx.callbacks.wandb import WandbCallback

__all__ = [
    "Callback",
    "CallbackContext",
    "EarlyStopping",
    "LRMonitor",
    "ModelCheckpoint",
    "TensorBoardCallback",
    "WandbCallback",
    "_CallbackContext",
]
