"""``LinkTask``: link and edge prediction as a Task-protocol object (spec §26).

``NNModel(module=net, task=LinkTask(split))`` (a net ``net(x, edge_index,
edge_label_index) -> logits``) trains on the split's training candidates with the task's
own objective, validates on every validation candidate with its own ``eval_step()``, and
refuses the default train / evaluate / predict paths, which cannot check link batches.
Score test after training with ``task.predict(model, task.loader("test", x, ...))``.

Every batch is checked against the split and its role before any forward pass
(:mod:`nnx.link_tasks.checks`), and every batch of a run's loaders once more before
anything is built (``check_train``). The task is component state ``"link.task"``: the
manifest's digest and topology policy, its candidate ids, its fixed negatives and the
negatives' seed, so a resume with another split or seed is refused before the first
resumed update (a ``resume_mode="weights_only"`` warm start compares nothing).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F

from nnx import MetricSpec
from nnx.extend import (
    ComponentSpec,
    LossTerm,
    Objective,
    ObjectiveContext,
    ObjectiveResult,
    canonical_bytes,
    check_count,
    check_seed,
    sha256_hex,
)
from nnx.link_tasks.checks import BatchChecker
from nnx.link_tasks.errors import LinkBatchError
from nnx.link_tasks.evaluation import (
    LinkPrediction,
    check_logits,
    forward,
    link_record,
    score_pass,
)
from nnx.link_tasks.loader import LinkLoader
from nnx.link_tasks.split import FORMAT, ROLES, LinkSplit

__all__ = ["COMPONENT", "METRICS", "LinkObjective", "LinkTask"]

COMPONENT = "link.task"
#: The registered metrics, ``link.<name>``, each reported as ``<name>``.
METRICS = ("auroc", "ap", "bce")
_STATE_VERSION = 1
_MAX_CANDIDATES = 1_000_000


class LinkObjective(Objective):
    """``LinkTask.objective()``: one term over a training batch's candidates, ``link_bce``
    (binary cross-entropy from the logits) or ``link_ce`` (cross-entropy over the
    categories of an edge-label split), each the mean over candidates."""

    def __init__(self, task: LinkTask) -> None:
        self.task = task
        self.source_task = task

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        batch = self.task.checker.parse(ctx.batch, "train")
        out = ctx.full_precision(forward(ctx.model, batch, ctx.forward))
        logits = check_logits(self.task.split, out, len(batch))
        targets = batch.targets.to(logits.device)
        if self.task.split.categories is None:
            numerator = F.binary_cross_entropy_with_logits(logits, targets.to(logits.dtype),
                                                           reduction="sum")
            name = "link_bce"
        else:
            numerator = F.cross_entropy(logits, targets, reduction="sum")
            name = "link_ce"
        return ObjectiveResult((LossTerm(name, numerator, float(len(batch))),))

    def __repr__(self) -> str:
        return f"{self.task!r}.objective()"


class LinkTask:
    """The task of one :class:`LinkSplit`: its mode (binary or edge-label) is the split's.
    ``seed`` (default: the split's) seeds the training negatives and shuffles;
    ``max_candidates`` bounds what one validation / prediction pass holds."""

    def __init__(self, split: LinkSplit, *, seed: int | None = None,
                 max_candidates: int = _MAX_CANDIDATES) -> None:
        if not isinstance(split, LinkSplit):
            raise TypeError(f"LinkTask takes a LinkSplit (split_links(...)); got "
                            f"{type(split).__name__}")
        self.split = split
        self.seed = split.seed if seed is None else check_seed("LinkTask.seed", seed)
        self.max_candidates = check_count("LinkTask.max_candidates", max_candidates)
        self.checker = BatchChecker(split)

    def __repr__(self) -> str:
        return (f"LinkTask({self.split!r}, seed={self.seed}, "
                f"max_candidates={self.max_candidates})")

    # -- batches -----------------------------------------------------------------------
    def loader(self, name: str, x: torch.Tensor, batch_size: int) -> LinkLoader:
        """``name``'s ("train" / "val" / "test") candidates in batches of ``batch_size``
        over ``split.message_edge_index()``; the training loader re-draws its negatives
        per epoch (``set_epoch``)."""
        if name not in ROLES:
            raise ValueError(f"LinkTask.loader name must be one of {ROLES}; got {name!r}")
        return LinkLoader(self.split, name, x, batch_size, seed=self.seed)

    def identity(self) -> dict[str, Any]:
        """The run id's task block: the split's digest, and the declarations off their
        defaults."""
        out: dict[str, Any] = {"kind": COMPONENT, "split": self.split.digest}
        if self.seed != self.split.seed:
            out["seed"] = self.seed
        if self.max_candidates != _MAX_CANDIDATES:
            out["max_candidates"] = self.max_candidates
        return out

    # -- the Task protocol -------------------------------------------------------------
    def objective(self) -> LinkObjective:
        return LinkObjective(self)

    def eval_step(self) -> Any:
        """The evaluator: every validation candidate scored, then exact metrics."""

        def link_eval(ctx: Any) -> Any:
            return link_record(score_pass(ctx.model, self.checker, ctx.val_loader, "val",
                                          max_candidates=self.max_candidates))

        return link_eval

    def predict(self, model: Any, batches: Iterable[Any]) -> LinkPrediction:
        """Every candidate of ``batches`` (one role's loader) scored in id order, float64;
        a validation / test loader must list each of its candidates exactly once."""
        batches = list(batches)
        if not batches:
            raise LinkBatchError("LinkTask.predict got no link batches")
        role = batches[0].get("link_role") if isinstance(batches[0], dict) else \
            getattr(batches[0], "link_role", None)
        if role not in ROLES:
            raise LinkBatchError(f"LinkTask.predict reads link batches (link_role one of "
                                 f"{ROLES}); got {role!r}")
        return score_pass(model, self.checker, batches, role,
                          max_candidates=self.max_candidates)

    def metric_specs(self) -> tuple[MetricSpec, ...]:
        """``link.auroc`` / ``link.ap`` / ``link.bce``, reported as ``auroc`` / ``ap`` /
        ``bce``: declare them (``NNTrainParams(metrics=task.metric_specs())``) to monitor
        one (``MonitorSpec("auroc")``)."""
        return tuple(MetricSpec(f"link.{name}", name=name) for name in METRICS)

    def check_train(self, params: Any) -> None:
        """Every training and validation batch checked before anything is built, and a
        training loader of this task's (a ``LinkLoader``) must carry its seed and split."""
        for loader, role in ((params.train_loader, "train"), (params.val_loader, "val")):
            if loader is None:
                continue
            if isinstance(loader, LinkLoader) and (loader.seed != self.seed or
                                                   loader.split != self.split):
                raise LinkBatchError(f"the {role} loader was built for another split or "
                                     f"negatives' seed ({loader.seed}) than this task's "
                                     f"({self.seed}): build it with task.loader(...)")
            for raw in loader:
                self.checker.parse(raw, role)

    def sample_ids(self, data: Any, rows: int) -> None:
        return None

    def refuse_default(self, path: str) -> None:
        """The default paths cannot check link batches: refused before any forward."""
        how = {"train": "trains with task.objective()",
               "evaluate": "validates with task.eval_step()",
               "predict": "scores with task.predict(model, loader)"}[path]
        raise LinkBatchError(f"LinkTask has no default {path} path (it cannot check link "
                             f"batches against the split): it {how}")

    # -- component state "link.task" -----------------------------------------------------
    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(COMPONENT, version=_STATE_VERSION)

    def component_state(self) -> dict[str, Any]:
        pairs, targets, roles = self.split.candidates()
        return {
            "format": FORMAT, "manifest": self.split.digest,
            "topology": self.split.topology, "mode": self.split.mode,
            "candidates": sha256_hex(canonical_bytes([pairs.tolist(), targets.tolist(),
                                                      roles.tolist()])),
            "fixed_negatives": sha256_hex(canonical_bytes(
                {r: e.tolist() for r, e in self.split.fixed_negatives.items()})),
            "negatives_seed": self.seed,
        }

    def check_component_state(self, state: Any, *, version: int) -> list[str]:
        if not isinstance(state, dict):
            return [f"{COMPONENT}: the saved state is not a mapping"]
        names = {"manifest": "split manifest", "topology": "topology policy",
                 "candidates": "candidate ids", "fixed_negatives": "fixed negatives",
                 "negatives_seed": "negatives' seed"}
        mine = self.component_state()
        return [f"{COMPONENT}: the checkpoint was trained with another {names.get(key, key)} "
                f"({state.get(key)!r}; this run's task has {value!r}): resume with the same "
                "split and seed" for key, value in mine.items() if state.get(key) != value]

    def load_component_state(self, state: Any, *, version: int) -> None:
        # Nothing evolves: check_component_state has already proved the split equal.
        return None
