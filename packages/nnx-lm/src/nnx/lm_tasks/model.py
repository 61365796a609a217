"""CausalLMModel: an NNModel that hands NNx its causal-LM task (docs/extending.md).

NNx finds a model's task through its ``task_adapter`` property; an add-on
model overrides it. ``train`` scans the loaders first, so a bad batch (left
padding, out-of-vocabulary targets) is refused before any run directory exists.
"""

from __future__ import annotations

from typing import Any

from nnx import NNModel, NNRun, NNTrainParams
from nnx.lm_tasks.causal import CausalLMTask

__all__ = ["CausalLMModel"]


class CausalLMModel(NNModel):
    """``NNModel(net_params, params, ...)`` trained and evaluated by ``task``."""

    def __init__(self, net_params: Any = None, params: Any = None, *, task: CausalLMTask,
                 **kwargs: Any) -> None:
        if not isinstance(task, CausalLMTask):
            raise TypeError(f"task must be a CausalLMTask; got {type(task).__name__}")
        self.task = task
        super().__init__(net_params, params, **kwargs)

    @property
    def task_adapter(self) -> Any:
        return self.task

    def train(self, params: NNTrainParams, **kwargs: Any) -> NNRun:
        """``NNModel.train`` with the task's objective and evaluation, after every batch
        of the train and validation loaders has been checked."""
        for loader in (params.train_loader, params.val_loader):
            if loader is not None:
                self.task.check_loader(loader)
        return super().train(params, **kwargs)

    def evaluate_lm(self, loader: Any) -> Any:
        """The task's NLL / perplexity / token accuracy over ``loader``."""
        return self.task.evaluate(self, loader)
