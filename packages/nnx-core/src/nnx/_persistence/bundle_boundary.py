"""``inspect_bundle_result`` (spec §27): :func:`inspect_bundle` as a value.

It converts exactly two outcomes into ``Err(BoundaryError(...))`` and lets
everything else propagate:

* ``artifact_missing``: no bundle there (the path, or its ``bundle.json``, does
  not exist);
* ``bundle_invalid``: a bundle that fails a §22 check (``BundleValidationError``).

Like :func:`inspect_bundle`, it reads the manifest and the JSON records only:
never a pickle, a factory or a registry.
"""

from __future__ import annotations

import os
from pathlib import Path

from nnx._foundation.result import BoundaryError, Err, Ok, Result
from nnx._persistence.bundle_format import MANIFEST, BundleValidationError
from nnx._persistence.bundle_info import BundleInfo
from nnx._persistence.bundle_read import inspect_bundle

__all__ = ["inspect_bundle_result"]

WHERE = "inspect_bundle_result"


def inspect_bundle_result(path: str | os.PathLike[str]) -> Result[BundleInfo, BoundaryError]:
    """``Ok(BundleInfo)``, or ``Err`` with code ``artifact_missing`` / ``bundle_invalid``."""
    root = Path(path)
    context = {"path": root.as_posix()}
    # lexists: a dangling symlink is "there" (and refused as invalid), not missing.
    if not os.path.lexists(root) or (root.is_dir() and not os.path.lexists(root / MANIFEST)):
        missing = FileNotFoundError(f"no run bundle at {root.as_posix()} (no {MANIFEST})")
        return Err(BoundaryError("artifact_missing", WHERE, context, missing))
    try:
        return Ok(inspect_bundle(root))
    except FileNotFoundError as exc:  # removed while we read it
        return Err(BoundaryError("artifact_missing", WHERE, context, exc))
    except BundleValidationError as exc:
        return Err(BoundaryError("bundle_invalid", WHERE, context, exc))
