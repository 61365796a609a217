"""Callbacks (spec §5): the bus and the built-in listeners.

TensorBoardCallback and WandbCallback import their optional dependency only
when constructed.
"""

from nnx.callbacks.base import Callback, CallbackContext, _CallbackContext
from nnx.callbacks.early_stopping import EarlyStopping
from nnx.callbacks.lr_monitor import LRMonitor
from nnx.callbacks.model_checkpoint import ModelCheckpoint

__all__ = [
    "Callback",
    "CallbackContext",
    "EarlyStopping",
    "LRMonitor",
    "ModelCheckpoint",
    "_CallbackContext",
]
