"""Configuration identity: a digest of run.yaml without its runtime fields (salt, seeds,
device: nnx-core's ``RunDocument.identity_config``).

The seeds are the training (or Trainer) seed and a registered ModelSpec's
initialization seed; they make the replicate key instead (``seed=3``, plus
``init_seed=<n>`` when that differs). A run with a parent replaces the parent's id with
its lineage (:mod:`nnx.comparison.lineage`).
"""

from __future__ import annotations

from typing import Any

from nnx.comparison.document import RunFiles
from nnx.extend import canonical_bytes, sha256_hex

__all__ = ["digest", "replicate_key"]


def digest(document: Any) -> str:
    return "sha256:" + sha256_hex(canonical_bytes(document))


def replicate_key(run: RunFiles) -> str | None:
    """``seed=<seed>`` (plus ``init_seed=<n>`` when it differs); None without a seed."""
    seed, init = run.document.seed, run.document.init_seed
    if seed is None:
        return None
    return f"seed={seed}" if init is None or init == seed else f"seed={seed},init_seed={init}"
