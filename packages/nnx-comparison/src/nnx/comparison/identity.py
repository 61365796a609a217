"""Configuration identity: a digest of run.yaml without its salt, seeds and device.

The seeds are the training (or Trainer) seed and a registered ModelSpec's
initialization seed; they make the replicate key instead (``seed=3``, plus
``init_seed=<n>`` when that differs). A run with a parent replaces the parent's id with
its lineage (:mod:`nnx.comparison.lineage`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from nnx.comparison.files import RunFiles
from nnx.extend import canonical_bytes, sha256_hex

__all__ = ["digest", "init_seed", "replicate_key", "stripped_config"]


def digest(document: Any) -> str:
    return "sha256:" + sha256_hex(canonical_bytes(document))


def _registered(model: Mapping[str, Any]) -> Mapping[str, Any] | None:
    net = model.get("net")
    return net if isinstance(net, Mapping) and net.get("kind") == "registered" else None


def init_seed(run: RunFiles) -> int | None:
    """A registered ModelSpec's initialization seed (None for other nets)."""
    model = run.config.get("model")
    spec = _registered(model) if isinstance(model, Mapping) else None
    seed = None if spec is None else spec.get("seed", 0)
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else None


def replicate_key(run: RunFiles) -> str | None:
    """``seed=<seed>`` (plus ``init_seed=<n>`` when it differs); None without a seed."""
    seed = run.loop.get("seed")
    if not isinstance(seed, int) or isinstance(seed, bool):
        return None
    init = init_seed(run)
    return f"seed={seed}" if init is None or init == seed else f"seed={seed},init_seed={init}"


def stripped_config(run: RunFiles) -> dict[str, Any]:
    """run.yaml without salt, seeds, device and the parent's id (the lineage replaces it)."""
    doc = copy.deepcopy(dict(run.config))
    doc.pop("salt", None)
    for block in ("train", "trainer"):
        if isinstance(doc.get(block), dict):
            doc[block].pop("seed", None)
            doc[block].pop("parent_run_id", None)
    model = doc.get("model")
    if isinstance(model, dict):
        model.pop("device", None)
        spec = _registered(model)
        if isinstance(spec, dict):
            spec.pop("seed", None)
    return doc
