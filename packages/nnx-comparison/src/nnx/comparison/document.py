"""What nnx.comparison reads on disk: a run directory's plain files, each read at most once
per call: run.yaml, metadata.yaml (only for a run with a parent) through nnx-core's run
document readers, and the verified provenance. Nothing here opens a checkpoint, so nothing
is unpickled from a run directory (spec §23)."""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from nnx.extend import (
    AttemptRecord,
    RunDocument,
    RunProvenance,
    read_provenance,
    read_run_document,
    run_document_exists,
)

__all__ = ["RunFiles", "RunReader"]


@dataclass
class RunFiles:
    """What one run directory says of itself."""

    document: RunDocument  # run.yaml and metadata.yaml
    provenance: RunProvenance | None
    unreadable: str | None  # why provenance.json / attempt.json could not be read

    @property
    def run_id(self) -> str:
        return self.document.run_id

    @property
    def path(self) -> Path:
        return self.document.path

    @property
    def attempt(self) -> AttemptRecord | None:
        return None if self.provenance is None else self.provenance.attempt


class RunReader:
    """Reads runs under one root, caching each run's files for the call."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._cache: dict[str, RunFiles] = {}

    def exists(self, run_id: str) -> bool:
        return run_document_exists(self.root, run_id)

    def read(self, run_id: str) -> RunFiles:
        """The run's files; ValueError / OSError when run.yaml cannot be read. No symbolic
        link below the root is followed (nnx-core's path rule)."""
        if run_id not in self._cache:
            document = read_run_document(self.root, run_id)
            self._cache[run_id] = RunFiles(document, *_provenance(document.path))
        return self._cache[run_id]


def _provenance(path: Path) -> tuple[RunProvenance | None, str | None]:
    """The verified provenance and, when a provenance file exists but failed to verify,
    why (core's reader ignores such a file with a RuntimeWarning; it is caught here so a
    caller that must refuse it can)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        prov = read_provenance(path)
    problems = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    for w in caught:  # pass every warning on, as core would have
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return prov, (problems[0] if problems else None)
