"""Training paradigms (spec §10): step factories and objectives on nnx-core's one
update engine."""

from nnx.paradigms.mixing import cutmix_train_step_factory, mixup_train_step_factory
from nnx.paradigms.moe import moe_train_step_factory
from nnx.paradigms.simclr import nt_xent_loss, simclr_train_step_factory

__all__: list[str] = [
    "cutmix_train_step_factory",
    "mixup_train_step_factory",
    "moe_train_step_factory",
    "nt_xent_loss",
    "simclr_train_step_factory",
]
