"""What nnx.example_tool reads on disk: a run's document (run.yaml and metadata.yaml,
through nnx-core's ``read_run_document``, never by key), its provenance's committed epoch
and each epoch's last record up to it (``epoch_ends``: no checkpoint is opened, so nothing
is unpickled and torch is never imported)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from nnx import NNIterationDataPoint
from nnx.example_tool.errors import RunSummaryError
from nnx.extend import (
    RunDocument,
    epoch_ends,
    read_provenance,
    read_run_document,
    run_document_exists,
)

__all__ = ["RunFiles", "read_run"]


@dataclass(frozen=True)
class RunFiles:
    """One run as the tool sees it."""

    document: RunDocument
    records: tuple[NNIterationDataPoint, ...]  # each epoch's last record, in epoch order


def read_run(root: str | os.PathLike[str], run_id: str) -> RunFiles:
    """The run's files; RunSummaryError when there is no such run or its run.yaml cannot
    be read."""
    if not run_document_exists(root, run_id):
        raise RunSummaryError(f"no run {run_id} under {root}")
    try:
        document = read_run_document(root, run_id)
    except (OSError, ValueError) as exc:
        raise RunSummaryError(f"run {run_id}: run.yaml cannot be read ({exc})") from None
    # The attempt record says which epoch was committed; a history past it (a run killed
    # mid-epoch) is not the run's. Without provenance the whole history is read.
    provenance = read_provenance(document.path)
    attempt = None if provenance is None else provenance.attempt
    committed = None if attempt is None else attempt.last_epoch
    return RunFiles(document, tuple(epoch_ends(document.path, committed)))
