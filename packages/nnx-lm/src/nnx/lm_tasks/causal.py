"""CausalLMTask: next-token targets, the ``token_ce`` objective and the NLL evaluation
(spec §15). A plain class implementing core's ``Task`` protocol (docs/extending.md):
``NNModel(..., task=CausalLMTask(...))`` trains and evaluates with it.

Every path reads a batch through :func:`nnx.lm_tasks.batches.split_batch`, so
the objective's denominator, the NLL and the token accuracy count the same
positions: the update engine then normalizes by valid tokens across a window,
and an epoch's NLL does not depend on batching or right padding.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from nnx import ComponentSpec, EvalStepContext, NNEvaluationDataPoint
from nnx.extend import (
    UNIT_HALF_OPEN,
    LossTerm,
    Objective,
    ObjectiveContext,
    ObjectiveResult,
    check_choice,
    check_count,
    check_real,
)
from nnx.lm_tasks.batches import LMBatch, split_batch

__all__ = ["ALIGNMENTS", "CausalLMObjective", "CausalLMTask"]

#: "shift_inputs": targets are the inputs shifted by one; "pre_shifted": batches carry them.
ALIGNMENTS = ("shift_inputs", "pre_shifted")
#: The record kind of an evaluation.
KIND = "causal_lm"


class CausalLMTask:
    """How a batch becomes next-token targets, trained and evaluated (spec §15).

    A model's task object (``NNModel(..., task=CausalLMTask(...))``; core's ``Task``
    protocol): ``objective()`` gives the ``token_ce`` objective the shared update
    engine runs, ``eval_step()`` the whole-loader NLL / perplexity / accuracy,
    ``check_train`` scans every batch before anything is written, ``identity()``
    enters the run id, and it is the ``lm.causal_task`` component, so a resume under
    another configuration is refused before the first resumed update.
    """

    VERSION = 1

    def __init__(self, *, vocab_size: int, pad_id: int | None = None, ignore_id: int = -100,
                 alignment: str = "shift_inputs", label_smoothing: float = 0.0) -> None:
        self.vocab_size = check_count("CausalLMTask.vocab_size", vocab_size)
        self.pad_id = None if pad_id is None else check_count(
            "CausalLMTask.pad_id", pad_id, minimum=0, maximum=self.vocab_size - 1)
        self.ignore_id = check_count("CausalLMTask.ignore_id", ignore_id, minimum=-(2 ** 62))
        if 0 <= self.ignore_id < self.vocab_size:
            raise ValueError(f"CausalLMTask.ignore_id={self.ignore_id} is a token id of the "
                             f"vocabulary [0, {self.vocab_size}); use a negative id")
        self.alignment = check_choice("CausalLMTask.alignment", alignment, ALIGNMENTS)
        self.label_smoothing = float(check_real(
            "CausalLMTask.label_smoothing", label_smoothing, UNIT_HALF_OPEN))

    # -- configuration ------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        """The configuration, as checkpointed (``lm.causal_task``)."""
        return {"vocab_size": self.vocab_size, "pad_id": self.pad_id,
                "ignore_id": self.ignore_id, "alignment": self.alignment,
                "label_smoothing": self.label_smoothing}

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in self.config().items())
        return f"CausalLMTask({fields})"

    def split(self, batch: Any, device: torch.device | str | None = None) -> LMBatch:
        """``batch`` aligned, checked and moved to ``device``."""
        lm = split_batch(batch, alignment=self.alignment, vocab_size=self.vocab_size,
                         ignore_id=self.ignore_id, pad_id=self.pad_id)
        if device is None:
            return lm
        return LMBatch(lm.inputs.to(device), lm.targets.to(device), lm.valid.to(device))

    def check_loader(self, loader: Any) -> int:
        """Check every batch of ``loader`` before anything trains; return the valid tokens.

        The global RNG and the loader's own generator are restored, so the scan
        does not move the sample order of the run it guards.
        """
        count = 0
        with _rng_kept(loader):
            for batch in loader:
                count += int(self.split(batch).valid.sum())
        return count

    # -- the loss -------------------------------------------------------------------
    def token_ce(self, logits: Tensor, lm: LMBatch, *, smoothing: float | None = None
                 ) -> tuple[Tensor, int]:
        """(Σ cross-entropy over the valid positions, their count); ``smoothing`` None
        applies the task's label smoothing, 0.0 gives the plain NLL."""
        if logits.dim() != 3 or logits.shape[:2] != lm.targets.shape or (
                logits.shape[-1] != self.vocab_size):
            raise ValueError(f"causal-LM logits must be (batch, seq, {self.vocab_size}) for "
                             f"targets of shape {tuple(lm.targets.shape)}; got "
                             f"{tuple(logits.shape)}")
        eps = self.label_smoothing if smoothing is None else smoothing
        picked = logits[lm.valid]
        total = F.cross_entropy(picked, lm.targets[lm.valid], reduction="sum",
                                label_smoothing=eps)
        return total, int(picked.shape[0])

    # -- the Task protocol ------------------------------------------------------------
    def objective(self) -> CausalLMObjective:
        return CausalLMObjective(self)

    def eval_step(self) -> Any:
        def causal_lm_eval(ctx: EvalStepContext) -> NNEvaluationDataPoint:
            return self.evaluate(ctx.model, ctx.val_loader)
        return causal_lm_eval

    def metric_specs(self) -> tuple[Any, ...]:
        return ()

    def sample_ids(self, data: Any, rows: int) -> None:
        return None  # predict is refused below: nothing to number

    def check_train(self, params: Any) -> None:
        """Every batch of the train and validation loaders checked before anything is
        built, so a bad batch (left padding, an out-of-vocabulary target) is refused
        before any run directory exists or any weight moves."""
        for loader in (params.train_loader, params.val_loader):
            if loader is not None:
                self.check_loader(loader)

    def refuse_default(self, path: str) -> None:
        # The default step, evaluate() and predict() read (batch, classes) outputs;
        # a (batch, seq, vocab) LM output would be scored on the wrong axis.
        if path == "evaluate":
            raise ValueError("a causal-LM model is evaluated by its task: use "
                             "model.task.evaluate(model, loader)")
        if path in ("train", "predict"):
            raise ValueError(f"the default {path} path does not fit causal-LM batches: "
                             "train with the task's objective, predict with model.net(ids)")

    # -- evaluation ---------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self, model: Any, loader: Any) -> NNEvaluationDataPoint:
        """NLL, perplexity and token accuracy over the whole ``loader`` (never a mean of
        batch means); unsmoothed; ``status="empty"`` with no loss when nothing is valid."""
        nll, hits, count = 0.0, 0, 0
        for batch in loader:
            lm = self.split(batch, model.device)
            logits = model.forward_raw((lm.inputs,)).float()
            total, n = self.token_ce(logits, lm, smoothing=0.0)
            nll += float(total.double())
            hits += int((logits.argmax(-1)[lm.valid] == lm.targets[lm.valid]).sum())
            count += n
        if count == 0:
            return NNEvaluationDataPoint(kind=KIND, count=0, status="empty")
        mean = nll / count
        metrics = {"nll": mean, "perplexity": math.exp(mean), "token_accuracy": hits / count}
        return NNEvaluationDataPoint(loss=mean, metrics=metrics, kind=KIND, count=count,
                                     status="ok")

    # -- identity and component state -----------------------------------------------------
    def identity(self) -> dict[str, Any]:
        """The run id's ``task`` block (core's Task.identity): the configuration, each value
        only when it differs from its default, so a field added later keeps old ids."""
        defaults = {"pad_id": None, "ignore_id": -100, "alignment": "shift_inputs",
                    "label_smoothing": 0.0}
        config = self.config()
        return {"kind": "lm.causal_task", "vocab_size": config["vocab_size"],
                **{k: config[k] for k, d in defaults.items() if config[k] != d}}

    def component_spec(self) -> ComponentSpec:
        return ComponentSpec("lm.causal_task", version=self.VERSION)

    def component_state(self) -> dict[str, Any]:
        return self.config()

    def check_component_state(self, state: Mapping[str, Any], *, version: int) -> list[str]:
        saved, live = dict(state), self.config()
        return [f"lm.causal_task: the run was trained with {k}={saved.get(k)!r}, this task "
                f"has {k}={live[k]!r}" for k in live if saved.get(k) != live[k]]

    def load_component_state(self, state: Mapping[str, Any], *, version: int) -> None:
        # The state is configuration only, checked equal before any load: nothing to set.
        problems = self.check_component_state(state, version=version)
        if problems:
            raise ValueError("; ".join(problems))


class CausalLMObjective(Objective):
    """One normalized term, ``token_ce``: Σ CE over valid positions / #valid (spec §15).

    It names its task as ``source_task`` (core's seam), so ``NNModel.train(objective=
    task.objective())`` records the task in the run id and checkpoints it as the
    ``lm.causal_task`` component, exactly as ``task=task`` does.
    """

    def __init__(self, task: CausalLMTask) -> None:
        self.task = self.source_task = task

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        lm = self.task.split(ctx.batch, ctx.model.device)
        logits = ctx.full_precision(ctx.forward((lm.inputs,)))
        total, count = self.task.token_ce(logits, lm)
        return ObjectiveResult((LossTerm("token_ce", total, float(count)),))

    def __repr__(self) -> str:
        return f"CausalLMObjective({self.task!r})"


@contextlib.contextmanager
def _rng_kept(loader: Any) -> Iterator[None]:
    generators: Sequence[Any] = [g for g in (getattr(loader, "generator", None),
                                             getattr(getattr(loader, "sampler", None),
                                                     "generator", None))
                                 if isinstance(g, torch.Generator)]
    states = [g.get_state() for g in generators]
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            for g, s in zip(generators, states, strict=True):
                g.set_state(s)
