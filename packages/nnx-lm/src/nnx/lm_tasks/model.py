"""CausalLMModel: an ``NNModel`` handed its causal-LM task (docs/lm.md §6).

No subclass: core's ``NNModel(..., task=...)`` takes any object implementing the
``Task`` protocol, so this is a function that checks the task and builds the model.
``model.task`` is the task; ``model.task.evaluate(model, loader)`` its evaluation.
"""

from __future__ import annotations

from typing import Any

from nnx import NNModel
from nnx.lm_tasks.causal import CausalLMTask

__all__ = ["CausalLMModel"]


# A function under the documented class-like name: the call reads as it always did.
def CausalLMModel(net_params: Any = None, params: Any = None, *,
                  task: CausalLMTask, **kwargs: Any) -> NNModel:
    """``NNModel(net_params, params, task=task, ...)`` trained and evaluated by ``task``.

    ``train`` checks every batch of its loaders first, then runs the task's objective
    and eval step; the task's configuration is part of the run id.
    """
    if not isinstance(task, CausalLMTask):
        raise TypeError(f"task must be a CausalLMTask; got {type(task).__name__}")
    return NNModel(net_params, params, task=task, **kwargs)
