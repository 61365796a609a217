"""WandbCallback (spec §5, §6.3, §6.4): the epoch's records as a Weights & Biases run.

Needs the ``wandb`` extra (``pip install "nnx-core[wandb]"``). Construction
checks that it is installed; ``wandb`` is imported only when the run begins.

When the run begins, ``wandb.init`` opens one W&B run per NNx run: named
after the run id, with the run's configuration (``run.yaml``) as its config
and its files under ``<run dir>/wandb``. Each epoch end logs the same keys
TensorBoardCallback writes (see :mod:`nnx.callbacks._scalars`) with
``step = epoch``; the run is finished when training ends.

``mode="offline"`` never touches the network: the run stays in its offline
directory until ``wandb sync``. ``mode=None`` leaves the choice to W&B
(``WANDB_MODE``, else online). Any other ``wandb.init`` keyword (``entity``,
``tags``, ``group``, ``settings``, …) passes through ``**init_kwargs``, and
one given there wins over the defaults above. By default an active W&B run
is finished before this one starts (``reinit="finish_previous"``), so the
global ``wandb.log`` reaches this run while it trains; pass
``reinit="create_new"`` to leave another active run alone.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from nnx._foundation.extras import import_extra, require_extra
from nnx.callbacks._scalars import epoch_scalars
from nnx.callbacks.base import Callback, CallbackContext

__all__ = ["WandbCallback"]

_OWNER = "WandbCallback"


def _finish_previous(wandb: Any) -> str | bool:
    """``"finish_previous"`` where W&B knows it; ``True`` (its older spelling) before."""
    try:
        annotation = inspect.signature(wandb.init).parameters["reinit"].annotation
    except (KeyError, TypeError, ValueError):
        return True
    return "finish_previous" if "finish_previous" in str(annotation) else True


class WandbCallback(Callback):
    """Log each epoch's scalars to a W&B run. ``wandb_run`` is the open W&B run, if any."""

    def __init__(self, project: str = "nnx", *, mode: str | None = None,
                 **init_kwargs: Any) -> None:
        require_extra(_OWNER, "wandb", "wandb")
        if not isinstance(project, str) or not project:
            raise ValueError(f"{_OWNER}.project must be a non-empty string; got {project!r}")
        if mode is not None and not isinstance(mode, str):
            raise ValueError(f"{_OWNER}.mode must be a string or None; got {mode!r}")
        self.project = project
        self.mode = mode
        self.init_kwargs = dict(init_kwargs)
        self.wandb_run: Any = None

    def on_train_begin(self, ctx: CallbackContext) -> None:
        if ctx.rank != 0:
            return  # under DDP only rank 0 logs
        wandb = import_extra(_OWNER, "wandb", "wandb")
        self._finish()  # a run a failed earlier training left open
        kwargs: dict[str, Any] = {
            "project": self.project,
            "name": ctx.run.id,
            "config": ctx.run.state(),
            "mode": self.mode,
            "dir": str(Path(ctx.run.path).absolute()),
            "reinit": _finish_previous(wandb),
        }
        kwargs.update(self.init_kwargs)
        self.wandb_run = wandb.init(**kwargs)

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        if self.wandb_run is not None:
            self.wandb_run.log(epoch_scalars(ctx), step=ctx.epoch)

    def on_train_end(self, ctx: CallbackContext) -> None:
        self._finish()

    def _finish(self) -> None:
        if self.wandb_run is not None:
            run, self.wandb_run = self.wandb_run, None
            run.finish()
