"""An objective (the ``nnx.extend`` objective contract): ``HuberObjective``.

An objective only describes the loss of one microbatch, as named
:class:`~nnx.extend.LossTerm` s in an :class:`~nnx.extend.ObjectiveResult`; the shared
update engine does the rest (backward, accumulation, mixed precision, clipping, the
non-finite policy). Pass it as ``model.train(params, objective=HuberObjective())``,
or let a task hand it over (:class:`~nnx.example_plugin.task.HuberTask`).
"""

from __future__ import annotations

from torch.nn import functional

from nnx.extend import POSITIVE, LossTerm, Objective, ObjectiveContext, ObjectiveResult, check_real

__all__ = ["HuberObjective"]


class HuberObjective(Objective):
    """The Huber loss of the net's output against float targets (one value per row).

    One term, ``"huber"``: its numerator is the loss summed over the batch's values
    and its denominator their count, so a window of uneven microbatches averages over
    every value exactly. ``delta`` is where the loss turns from quadratic to linear.
    """

    def __init__(self, *, delta: float = 1.0) -> None:
        self.delta = check_real("HuberObjective.delta", delta, POSITIVE)

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        inputs, target = ctx.split()
        # Under a reduced precision the forward is float16 / bfloat16: count in float32.
        output = ctx.full_precision(ctx.forward(inputs)).reshape(target.shape)
        total = functional.huber_loss(output, target.float(), reduction="sum",
                                      delta=self.delta)
        return ObjectiveResult((LossTerm("huber", total, float(target.numel())),))
