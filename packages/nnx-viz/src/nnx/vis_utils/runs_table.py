"""The tables of the runs report: each run's ``nnx runs list`` row, and the configuration
fields (run.yaml flattened to dotted keys) that differ between the runs.

Plain data, no Plotly and no HTML: :mod:`nnx.vis_utils.runs_report` escapes and lays
them out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nnx.extend import canonical_bytes, format_score, summarize_run

__all__ = ["ABSENT", "RUN_COLUMNS", "ConfigDiff", "config_diff", "flatten", "run_row",
           "short_labels"]

#: The runs table's columns, in order.
RUN_COLUMNS = ("run", "net", "status", "epochs", "BEST epoch", "BEST score", "created",
               "data id", "salt")

#: A key one run's configuration does not hold (shown as such, and counted as differing).
ABSENT = "(absent)"


def run_row(run: Any) -> tuple[str, ...]:
    """``run``'s row under :data:`RUN_COLUMNS`, read as ``nnx runs list`` reads it
    (status, BEST and what it scores, created and data id from the run directory)."""
    row = summarize_run(run.root, run.id)
    if row.best_epoch is None:
        best_epoch, best = "-", "-"
    else:
        best_epoch = str(row.best_epoch)
        best = ("no finite score" if row.best_what is None or row.best_value is None
                else f"{row.best_what} {format_score(row.best_what, row.best_value)}")
    created = "-" if row.created is None else row.created.strftime("%Y-%m-%d %H:%M")
    return (row.run_id, row.net, row.status, str(row.epochs), best_epoch, best, created,
            row.data_id or "-", row.salt or "-")


def flatten(document: Any, prefix: str = "") -> dict[str, Any]:
    """A configuration document as ``{"train.optim.max_lr": 0.05, ...}``: mappings are
    walked (an empty one is a value of its own); lists and scalars are values."""
    if not isinstance(document, Mapping) or (prefix and not document):
        return {prefix: document}
    flat: dict[str, Any] = {}
    for key, value in document.items():
        flat.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return flat


def _shown(value: Any) -> str:
    # A string as written; anything else as JSON, so 1 and "1" or [8] and "[8]" differ.
    if value is ABSENT or isinstance(value, str):
        return str(value)
    return canonical_bytes(value).decode("utf-8")


@dataclass(frozen=True)
class ConfigDiff:
    """The differing keys, each with its value per run (the runs' order), and how many
    keys every run holds with the same value."""

    rows: list[tuple[str, list[str]]]
    identical: int


def config_diff(documents: Sequence[Mapping[str, Any]]) -> ConfigDiff:
    """What differs between the configuration ``documents`` (one per run), key by key in
    sorted order. Values are compared by their canonical JSON bytes (the encoding a run
    id hashes), so a key differs exactly when the runs' configurations do there."""
    flats = [flatten(document) for document in documents]
    keys = sorted(set().union(*flats)) if flats else []
    rows: list[tuple[str, list[str]]] = []
    identical = 0
    for key in keys:
        values = [flat.get(key, ABSENT) for flat in flats]
        encoded = {b"" if v is ABSENT else b"=" + canonical_bytes(v) for v in values}
        if len(encoded) == 1:
            identical += 1
        else:
            rows.append((key, [_shown(v) for v in values]))
    return ConfigDiff(rows, identical)


def short_labels(run_ids: Sequence[str], *, least: int = 8) -> list[str]:
    """The shortest prefix of each id (at least ``least`` characters) that no other of
    ``run_ids`` starts with: the curves' legend names each run by it."""
    labels = []
    for run_id in run_ids:
        others = [other for other in run_ids if other != run_id]
        n = min(least, len(run_id))
        while n < len(run_id) and any(other.startswith(run_id[:n]) for other in others):
            n += 1
        labels.append(run_id[:n])
    return labels
