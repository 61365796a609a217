"""A run directory's plain files, each read at most once per call: run.yaml,
metadata.yaml (only for a run with a parent) and the verified provenance. Nothing here
opens a checkpoint, so nothing is unpickled from a run directory (spec §23)."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nnx.extend import AttemptRecord, RunProvenance, inside, load_yaml, read_provenance

__all__ = ["RunFiles", "RunReader"]


@dataclass
class RunFiles:
    """What one run directory says of itself."""

    run_id: str
    path: Path
    config: Mapping[str, Any]  # run.yaml
    provenance: RunProvenance | None
    unreadable: str | None  # why provenance.json / attempt.json could not be read
    _metadata: Mapping[str, Any] | None = field(default=None, repr=False)

    @property
    def attempt(self) -> AttemptRecord | None:
        return None if self.provenance is None else self.provenance.attempt

    @property
    def loop(self) -> Mapping[str, Any]:
        """The train block, or a Trainer run's trainer block."""
        block = self.config.get("train", self.config.get("trainer"))
        return block if isinstance(block, Mapping) else {}

    def metadata(self) -> Mapping[str, Any]:
        """metadata.yaml ({} when missing or unreadable: an unrecorded fact)."""
        if self._metadata is None:
            try:
                doc = load_yaml(self.path / "metadata.yaml")
            except (OSError, ValueError):
                doc = {}
            self._metadata = doc if isinstance(doc, Mapping) else {}
        return self._metadata


class RunReader:
    """Reads runs under one root, caching each run's files for the call."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root)
        self._cache: dict[str, RunFiles] = {}

    def exists(self, run_id: str) -> bool:
        return (self.root / run_id / "run.yaml").is_file()

    def read(self, run_id: str) -> RunFiles:
        """The run's files; ValueError / OSError when run.yaml cannot be read. No symbolic
        link below the root is followed (nnx-core's path rule)."""
        if run_id not in self._cache:
            path = inside(self.root, run_id, what="run")
            config = load_yaml(inside(path, "run.yaml", what="run file"))
            if not isinstance(config, Mapping) or not isinstance(config.get("model"), Mapping):
                raise ValueError(f"{path / 'run.yaml'} is not an NNx run configuration")
            self._cache[run_id] = RunFiles(run_id, path, config, *_provenance(path))
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
