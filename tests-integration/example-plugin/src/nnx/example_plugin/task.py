"""A task written from scratch against the ``Task`` protocol: ``HuberTask``.

It inherits nothing from nnx-core: ``NNModel(net_params=..., task=HuberTask())``
takes any object with the protocol's members (docs/extending.md, "The Task
protocol"), and core builds the per-batch machinery (validation, records,
accumulators) around it from the model's loss.
"""

from __future__ import annotations

from typing import Any

from nnx.example_plugin.objective import HuberObjective
from nnx.extend import POSITIVE, check_real

__all__ = ["HuberTask"]


class HuberTask:
    """Regression on float targets, trained on the Huber loss (:class:`HuberObjective`).

    Validation is the model's own ``evaluate`` (its loss, say MSE); ``model.predict``
    is refused, since its default decodes classes and this task's outputs are values.
    """

    def __init__(self, *, delta: float = 1.0) -> None:
        self.delta = check_real("HuberTask.delta", delta, POSITIVE)

    # -- the Task protocol (nnx.extend.Task): every member is required -----------------

    def objective(self) -> HuberObjective:
        """What ``NNModel.train`` runs when given neither ``objective=`` nor a step."""
        return HuberObjective(delta=self.delta)

    def eval_step(self) -> None:
        """None: validation is ``model.evaluate`` on the validation loader."""
        return None

    def metric_specs(self) -> tuple[()]:
        """No metric recorded natively (read by tools only; the loop declares none)."""
        return ()

    def sample_ids(self, data: Any, rows: int) -> None:
        """None: ``predict_proba`` numbers its rows ``0..rows-1``."""
        return None

    def refuse_default(self, path: str) -> None:
        """Refuse the default predict path ("train" and "evaluate" are accepted):
        raised before any forward, it is what ``model.predict`` raises."""
        if path == "predict":
            raise ValueError("HuberTask predicts values, not classes: model.predict would "
                             "decode classes; call model.net(x) for the values")

    # -- optional: the task's configuration enters the run id ---------------------------

    def identity(self) -> dict[str, Any]:
        """Plain data hashed into the run id and kept as run.yaml's ``task`` block; a
        value at its default is left out, so adding a field later keeps old ids."""
        return {"kind": "example.huber", **({"delta": self.delta} if self.delta != 1.0 else {})}
