"""ModelCheckpoint (spec §5): extra weights-only snapshots, written after the epoch commits.

``on_epoch_end`` runs before the epoch's commit, so the write is deferred
(``ctx.defer``) to the transaction's last step (§4.2): after LAST, the phase
checkpoints, BEST and runs/best, with the weights LAST holds.
"""

from __future__ import annotations

from typing import Any

from nnx._foundation.validation import check_count
from nnx._persistence.checkpoint import NNCheckpoint
from nnx.callbacks.base import Callback, CallbackContext
from nnx.models import MissingModelFactoryError, RuntimeModule
from nnx.transforms.recipe import transform_states

__all__ = ["ModelCheckpoint"]


class ModelCheckpoint(Callback):
    """Every ``every_n_epochs`` epochs, write ``checkpoints/<prefix>_e<epoch>.pt``
    (``.safetensors`` with ``format="safetensors"``).

    The files hold weights only (``training_state_present: false``) and the
    model's topology-transform recipes; pass a file's stem (``"custom_e3"``)
    as ``resume_from_checkpoint`` to warm-start from its weights.
    """

    def __init__(self, every_n_epochs: int = 1, prefix: str = "custom",
                 format: str = "pickle") -> None:
        self.every_n_epochs = check_count("ModelCheckpoint.every_n_epochs", every_n_epochs)
        self.suffix = {"pickle": ".pt", "safetensors": ".safetensors"}.get(format)
        if self.suffix is None:
            raise ValueError(f"ModelCheckpoint.format must be 'pickle' or 'safetensors'; "
                             f"got {format!r}")
        if not isinstance(prefix, str) or not prefix.isidentifier():
            raise ValueError(f"ModelCheckpoint.prefix must be a plain name; got {prefix!r}")
        self.prefix = prefix
        self.saved: list[str] = []

    def check_model(self, model: Any) -> None:
        """A safetensors file is a portable save (§3.2): refuse a runtime module, which no
        factory can rebuild, before the run directory or LAST exists."""
        net = getattr(getattr(model, "params", None), "net", None)
        if self.suffix == ".safetensors" and isinstance(net, RuntimeModule):
            raise MissingModelFactoryError(
                f"ModelCheckpoint(format='safetensors'): a safetensors checkpoint is a portable "
                f"save, but this model wraps a runtime module ({net.module}, "
                f"reconstructible=False) that no factory can rebuild; register a model factory "
                f"and use a ModelSpec, or use ModelCheckpoint(format='pickle')")

    def on_epoch_end(self, ctx: CallbackContext) -> None:
        if (ctx.epoch + 1) % self.every_n_epochs or ctx.rank != 0:
            return  # under DDP only rank 0 writes
        ctx.defer(self._save)

    def _save(self, ctx: CallbackContext) -> None:
        run, model = ctx.run, ctx.model
        tag = f"{self.prefix}_e{ctx.epoch}"
        checkpoint = NNCheckpoint(
            tag=tag, epoch=ctx.epoch, run_id=run.id, state_dict=ctx.model_state_dict(),
            model=run.model_params.state(),
            net=None if run.net_params is None else run.net_params.state(),
            train=run.loop_params.state(), idp=ctx.idp,
            # The recipes the weights need to be read back (§4.2), as LAST and BEST carry.
            transforms=transform_states(model))
        checkpoint.save(run.checkpoints_dir / f"{tag}{self.suffix}")
        self.saved.append(tag)
