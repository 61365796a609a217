"""CausalLMModel: an NNModel that hands NNx its causal-LM task (docs/extending.md).

NNx finds a model's task through its ``task_adapter`` property; an add-on
model overrides it. ``train`` scans the loaders first, so a bad batch (left
padding, out-of-vocabulary targets) is refused before any run directory exists.
"""

from __future__ import annotations

from typing import Any

from nnx import NNModel, NNRun, NNTrainParams
from nnx.lm_tasks.causal import CausalLMTask

__all__ = ["CausalLMModel", "TaskedModel"]


class TaskedModel(NNModel):
    """An ``NNModel`` that may hand NNx a causal-LM ``task`` (None: core's default
    adapter). The task then owns training (its objective), validation (its eval step),
    its component state and the run id's ``task`` block."""

    def __init__(self, net_params: Any = None, params: Any = None, *,
                 task: CausalLMTask | None = None, **kwargs: Any) -> None:
        if task is not None and not isinstance(task, CausalLMTask):
            raise TypeError(f"task must be a CausalLMTask or None; got {type(task).__name__}")
        self.task = task
        super().__init__(net_params, params, **kwargs)

    @property
    def task_adapter(self) -> Any:
        return self.task if self.task is not None else super().task_adapter

    def train(self, params: NNTrainParams, **kwargs: Any) -> NNRun:
        """``NNModel.train``; with a task, after every batch of the train and validation
        loaders has been checked (a bad batch is refused before any run directory)."""
        if self.task is not None:
            for loader in (params.train_loader, params.val_loader):
                if loader is not None:
                    self.task.check_loader(loader)
        return super().train(params, **kwargs)


class CausalLMModel(TaskedModel):
    """``NNModel(net_params, params, ...)`` trained and evaluated by ``task``."""

    task: CausalLMTask

    def __init__(self, net_params: Any = None, params: Any = None, *, task: CausalLMTask,
                 **kwargs: Any) -> None:
        if not isinstance(task, CausalLMTask):
            raise TypeError(f"task must be a CausalLMTask; got {type(task).__name__}")
        super().__init__(net_params, params, task=task, **kwargs)

    def evaluate_lm(self, loader: Any) -> Any:
        """The task's NLL / perplexity / token accuracy over ``loader``."""
        return self.task.evaluate(self, loader)
