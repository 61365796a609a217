"""Callbacks (spec §5): the bus and the built-in listeners.

TensorBoardCallback and WandbCallback check at construction that their extra
(``tensorboard`` / ``wandb``) is installed and import it only when a run
begins: importing this package never imports TensorBoard or W&B. Each name is
imported on first use (issue 38): a fit without callbacks loads the bus alone.
"""

from typing import TYPE_CHECKING

from nnx._foundation.lazy_exports import lazy_package

#: name -> the module it is read from; the TYPE_CHECKING block below lists the same.
_EXPORTS: dict[str, str] = {
    "Callback": "nnx.callbacks.base",
    "CallbackContext": "nnx.callbacks.base",
    "EarlyStopping": "nnx.callbacks.early_stopping",
    "LRMonitor": "nnx.callbacks.lr_monitor",
    "ModelCheckpoint": "nnx.callbacks.model_checkpoint",
    "TensorBoardCallback": "nnx.callbacks.tensorboard",
    "WandbCallback": "nnx.callbacks.wandb",
    "_CallbackContext": "nnx.callbacks.base",
}

__all__ = sorted(_EXPORTS)

lazy_package(__name__)

if TYPE_CHECKING:
    from nnx.callbacks.base import Callback as Callback
    from nnx.callbacks.base import CallbackContext as CallbackContext
    from nnx.callbacks.base import _CallbackContext as _CallbackContext
    from nnx.callbacks.early_stopping import EarlyStopping as EarlyStopping
    from nnx.callbacks.lr_monitor import LRMonitor as LRMonitor
    from nnx.callbacks.model_checkpoint import ModelCheckpoint as ModelCheckpoint
    from nnx.callbacks.tensorboard import TensorBoardCallback as TensorBoardCallback
    from nnx.callbacks.wandb import WandbCallback as WandbCallback
