"""The offline distillation objective (spec §10.1, §6.5, §14.1).

``alpha · KL(teacher ‖ student) + (1 − alpha) · CE(student, label)``, both at
temperature 1: stored probabilities have no logits to soften, so no temperature
and no T² (q = [0.75, 0.25] against zero logits gives 0.130812, gradient p − q).
The teacher's probabilities are detached; the objective never steps.

Both terms share one mask and one denominator per microbatch, its rows, so the
engine's Σ numerators / Σ denominators makes accumulation over uneven
microbatches exactly the full batch. A partly labelled dataset or batch is
refused (the terms would need different denominators), and alpha < 1 needs every
record labelled.

The identity (format version, schema digest, alpha, the candidate alignment) is
checkpointed component state ``"paradigms.offline_distillation"``: a stateful
resume with any of them changed is refused before the first resumed update.
"""

from __future__ import annotations

import math
from typing import Any

import torch.nn.functional as F

from nnx.extend import (
    PROBABILITY,
    ComponentSpec,
    LossTerm,
    Objective,
    ObjectiveContext,
    ObjectiveResult,
    check_real,
)
from nnx.paradigms.offline_distillation.batch import imitation_sums, student_logits

__all__ = ["COMPONENT", "IDENTITY_FORMAT", "OfflineDistillationObjective"]

COMPONENT = "paradigms.offline_distillation"
IDENTITY_FORMAT = "nnx.offline-distillation/1"
_VERSION = 1


class OfflineDistillationObjective(Objective):
    """The objective returned by ``TeacherDataset.objective(alpha)``."""

    def __init__(self, candidates: tuple[str, ...], schema_digest: str, alpha: float, *,
                 labelling: str) -> None:
        self.alpha = check_real("TeacherDataset.objective alpha", alpha, PROBABILITY)
        if labelling == "partial":
            raise ValueError("TeacherDataset.objective: the dataset is partly labelled; label "
                             "every record or none (the two terms share one denominator)")
        if self.alpha < 1 and labelling != "all":
            raise ValueError(f"TeacherDataset.objective(alpha={self.alpha}) trains a label term "
                             "and needs every record labelled; pass labels=, or alpha=1")
        self.candidates = tuple(candidates)
        self.schema_digest = schema_digest

    def identity(self) -> dict[str, Any]:
        """What makes this objective this objective (for ExperimentManifest.for_model)."""
        return {"format": IDENTITY_FORMAT, "version": _VERSION,
                "schema_digest": self.schema_digest, "alpha": self.alpha,
                "candidates": list(self.candidates)}

    def __call__(self, ctx: ObjectiveContext) -> ObjectiveResult:
        who = "offline distillation objective"
        batch = ctx.batch
        logits = student_logits(ctx.model, batch, self.candidates, who, forward=ctx.forward)
        labelled = batch.labelled.to(logits.device)
        n_labelled = int(labelled.sum())
        rows = int(logits.shape[0])
        if 0 < n_labelled < rows:
            raise ValueError(f"{who}: a partly labelled batch ({n_labelled} of {rows} rows)")
        terms = []
        kl = imitation_sums(logits, batch.probabilities).sum()
        if self.alpha > 0:
            terms.append(LossTerm("imitation", kl, float(rows), self.alpha))
        metrics = {"imitation": float(kl.detach()) / rows if rows else math.nan}
        # A labelled batch hands its labels to the record (accuracy / error by label).
        target = batch.labels.to(logits.device) if n_labelled == rows and rows else None
        if self.alpha < 1:
            if n_labelled != rows:
                raise ValueError(f"{who}: alpha={self.alpha} needs labelled rows; the batch has "
                                 "none")
            assert target is not None
            ce = F.cross_entropy(logits, target, reduction="sum")
            terms.append(LossTerm("label_ce", ce, float(rows), 1.0 - self.alpha))
            metrics["label_ce"] = float(ce.detach()) / rows if rows else math.nan
        return ObjectiveResult(tuple(terms), metrics=metrics, output=logits.detach(),
                               target=target)

    # -- component state (§14.1) -------------------------------------------------------
    def component_spec(self) -> ComponentSpec:
        return ComponentSpec(COMPONENT, version=_VERSION)

    def component_state(self) -> dict[str, Any]:
        return self.identity()

    def check_component_state(self, state: Any, *, version: int) -> list[str]:
        if not isinstance(state, dict):
            return [f"{COMPONENT}: the saved state is not a mapping"]
        mine = self.identity()
        return [f"{COMPONENT}: the checkpoint was trained with {key}={state.get(key)!r}, this "
                f"run's objective has {key}={value!r}: resume with the same dataset and alpha"
                for key, value in mine.items() if state.get(key) != value]

    def load_component_state(self, state: Any, *, version: int) -> None:
        # Nothing evolves: check_component_state has already proved the identity equal.
        return None

    def __repr__(self) -> str:
        return f"TeacherDataset.objective(alpha={self.alpha})"
