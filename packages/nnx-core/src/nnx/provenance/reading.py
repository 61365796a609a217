"""Reading a run's provenance back (spec §4.4), verified and never raising.

provenance.json is ``{"fingerprint": <hex>, "manifest": <document>}``; the
fingerprint is recomputed from the manifest on every read. attempt.json must
name the same fingerprint. A file that fails either check is ignored with a
RuntimeWarning, so provenance never stops a run from loading or resuming.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from nnx.provenance._files import ATTEMPT_FILE, PROVENANCE_FILE, read_json
from nnx.provenance.manifest import ExperimentManifest
from nnx.provenance.record import AttemptRecord

__all__ = ["RunProvenance", "load_manifest", "read_provenance"]


@dataclass(frozen=True, slots=True)
class RunProvenance:
    """A run directory's verified manifest and its latest attempt (None if unreadable)."""

    run_dir: Path
    fingerprint: str
    manifest: ExperimentManifest
    attempt: AttemptRecord | None


def load_manifest(path: str | os.PathLike[str]) -> ExperimentManifest:
    """Read and verify a provenance.json; raises ValueError / OSError when it fails."""
    doc = read_json(path)
    if not isinstance(doc, Mapping) or set(doc) != {"fingerprint", "manifest"}:
        raise ValueError("not a provenance record (expected 'fingerprint' and 'manifest')")
    manifest = ExperimentManifest.from_document(doc["manifest"])
    if manifest.fingerprint != doc["fingerprint"]:
        raise ValueError(f"recorded fingerprint {doc['fingerprint']!r} does not match the "
                         f"manifest's {manifest.fingerprint}")
    return manifest


def _ignore(path: Path, exc: BaseException) -> None:
    warnings.warn(f"ignoring unreadable provenance file {path}: {exc}", RuntimeWarning,
                  stacklevel=3)


def read_provenance(run_dir: str | os.PathLike[str]) -> RunProvenance | None:
    """The run's provenance, or None when it has none or it cannot be verified."""
    base = Path(run_dir)
    path = base / PROVENANCE_FILE
    if not os.path.lexists(path):
        return None
    try:
        manifest = load_manifest(path)
    except Exception as exc:
        _ignore(path, exc)
        return None
    attempt: AttemptRecord | None = None
    attempt_path = base / ATTEMPT_FILE
    if os.path.lexists(attempt_path):
        try:
            attempt = AttemptRecord.from_state(read_json(attempt_path))
            if attempt.fingerprint != manifest.fingerprint:
                raise ValueError(f"it records fingerprint {attempt.fingerprint}, not the "
                                 f"manifest's {manifest.fingerprint}")
        except Exception as exc:
            _ignore(attempt_path, exc)
            attempt = None
    return RunProvenance(base, manifest.fingerprint, manifest, attempt)
