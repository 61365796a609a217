"""The records a run bundle ships beside its weights, and what each must satisfy
(spec §18 model ids, §22 calibrators, §13.4 preprocessing).

A calibrator record must calibrate the bundled model's categorical task (its class
count and labels) and be bound to that model: a fingerprint ``model_id`` is checked
against the weights elsewhere (from the payload's bytes), a declared one must name
the exported run and checkpoint. A preprocessing record is a fitted Standardizer's
state, which rebuilds from data alone, as wide as the net's input. Export and every
validation run the same checks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from nnx.preprocessing import PreprocessingError, Standardizer

__all__ = ["calibrator_problems", "is_fingerprint", "read_preprocessing"]


def calibrator_problems(record: Any, task: Mapping[str, Any] | None, what: str,
                        source: tuple[str, str]) -> list[str]:
    """Why a calibrator ``record`` does not calibrate the bundle's ``task`` (labels,
    class count) or is declared for a model other than ``source`` (run id, checkpoint
    tag); [] when it does. Its fingerprint is checked separately."""
    if not isinstance(record, dict):
        return [f"{what} is not a JSON object"]
    labels, model_id = record.get("labels"), record.get("model_id")
    problems = []
    if not isinstance(record.get("format"), str):
        problems.append(f"{what} names no format")
    if (not isinstance(labels, list) or not labels
            or not all(isinstance(x, (str, int)) and not isinstance(x, bool) for x in labels)
            or len({repr(x) for x in labels}) != len(labels)):
        problems.append(f"{what} has no list of distinct labels")
        return problems
    if model_id is not None and (not isinstance(model_id, str) or not model_id):
        problems.append(f"{what} has model_id {model_id!r}, not a string")
    elif model_id is not None and not is_fingerprint(model_id):
        problems += _declared_for_another(model_id, what, *source)
    declared = record.get("num_classes", len(labels))
    if declared != len(labels):
        problems.append(f"{what} declares {declared} classes and {len(labels)} labels")
    if task is None or task.get("kind") != "categorical":
        problems.append(f"{what}: a calibrator calibrates a categorical model, and this model "
                        "declares no categorical task")
        return problems
    if len(labels) != task["num_classes"]:
        problems.append(f"{what} calibrates {len(labels)} classes, the model has "
                        f"{task['num_classes']}")
    elif list(labels) != list(task["labels"]):
        problems.append(f"{what} has labels {labels}, the task's are {task['labels']}")
    return problems


def _declared_for_another(model_id: str, what: str, run_id: str, tag: str) -> list[str]:
    """A declared id names the bundled model as the run's id, alone or followed by
    ``:<checkpoint>`` of the exported checkpoint (``f"{run.id}:BEST"`` for "best", in
    any case); anything else was declared for another model (spec §18, §22)."""
    name, colon, checkpoint = model_id.partition(":")
    if name == run_id and (not colon or checkpoint.lower() == tag.lower()):
        return []
    return [f"{what} is declared for model {model_id!r}; this bundle holds checkpoint "
            f"{tag!r} of run {run_id} (declare {run_id!r} or '{run_id}:{tag.upper()}', or "
            "bind it to these weights with model_fingerprint)"]


def is_fingerprint(model_id: Any) -> bool:
    return (isinstance(model_id, str) and model_id.startswith("sha256:")
            and len(model_id) == 71)


def read_preprocessing(record: Any, net: Mapping[str, Any] | None, what: str
                       ) -> Standardizer:
    """The Standardizer ``record`` (its state) rebuilds, checked against the bundled
    net's input width where the net records one; ValueError naming ``what`` else."""
    try:
        standardizer = Standardizer.from_state(record)
    except PreprocessingError as exc:
        raise ValueError(f"{what} is not a fitted standardizer's state: {exc}") from None
    width = None if net is None else net.get("input_dim")
    if isinstance(width, int) and not isinstance(width, bool) and width != len(
            standardizer.columns):
        raise ValueError(f"{what} standardizes {len(standardizer.columns)} columns, the "
                         f"bundled net takes {width} inputs")
    return standardizer
