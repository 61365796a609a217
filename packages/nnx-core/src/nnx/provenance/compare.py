"""compare(a, b): two experiments field by field, from their provenance alone (§4.4).

Each field is reported by a stable path (``data.train``, ``labels[1]``,
``config.optim.max_lr``) with one status:

* ``equal``: the same canonical bytes (so ``1`` and ``1.0`` differ);
* ``different``: both sides have the field, with other values;
* ``missing``: only one side has it;
* ``unknown``: an identity reference is unknown on either side;
* ``declared``: the same declared (unverified) identity on both sides;
* ``verified``: the same digest on both sides;
* ``absent``: a side has no provenance at all: then the only entry, at ``$``.

No model is loaded, no loader iterated and no file hashed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from nnx._foundation.hashing import canonical_bytes
from nnx.provenance.identity import KINDS, is_reference
from nnx.provenance.manifest import ExperimentManifest
from nnx.provenance.reading import RunProvenance, read_provenance

__all__ = ["STATUSES", "Comparison", "compare"]

STATUSES = ("equal", "different", "missing", "unknown", "declared", "verified", "absent")
_EQUAL = frozenset({"equal", "verified"})
_DIFFERING = frozenset({"different", "missing", "unknown", "absent"})
#: The path of the single entry reported when a side has no provenance.
WHOLE = "$"


@dataclass(frozen=True)
class Comparison:
    """Field path -> status, in path order, and the two fingerprints (None if absent)."""

    fields: Mapping[str, str]
    fingerprints: tuple[str | None, str | None] = field(default=(None, None))

    @property
    def verified_equal(self) -> bool:
        """Both sides have provenance and every field is equal or verified."""
        return (None not in self.fingerprints
                and all(status in _EQUAL for status in self.fields.values()))

    @property
    def differences(self) -> tuple[str, ...]:
        """Paths whose values differ or cannot be shown equal (declared ones excluded)."""
        return tuple(path for path, status in self.fields.items() if status in _DIFFERING)

    def __str__(self) -> str:
        width = max((len(path) for path in self.fields), default=0)
        return "\n".join(f"{path:<{width}}  {status}" for path, status in self.fields.items())


def compare(a: Any, b: Any, *, root: str | os.PathLike[str] | None = None) -> Comparison:
    """Compare manifests, run directories, runs (``.path``) or run ids (under ``root``).

    A run id string resolves to ``<root>/<id>`` (``root`` defaults to ``runs``
    in the working directory); a string holding a path separator is a path.
    """
    left, right = _manifest(a, root), _manifest(b, root)
    if left is None or right is None:
        fingerprints = (None if left is None else left.fingerprint,
                        None if right is None else right.fingerprint)
        return Comparison(MappingProxyType({WHOLE: "absent"}), fingerprints)
    out: dict[str, str] = {}
    _walk("", _fields(left), _fields(right), out)
    return Comparison(MappingProxyType(out), (left.fingerprint, right.fingerprint))


def _manifest(side: Any, root: str | os.PathLike[str] | None) -> ExperimentManifest | None:
    if isinstance(side, ExperimentManifest):
        return side
    if isinstance(side, RunProvenance):
        return side.manifest
    if isinstance(side, str):
        as_path = os.sep in side or "/" in side or os.path.isabs(side)
        base = Path(side) if as_path else Path("runs" if root is None else root) / side
    elif isinstance(side, os.PathLike):
        base = Path(side)
    elif isinstance(getattr(side, "path", None), os.PathLike):
        base = Path(side.path)
    else:
        raise TypeError("compare takes an ExperimentManifest, a run directory, an NNRun or "
                        f"a run id; got {type(side).__name__}")
    found = read_provenance(base)
    return None if found is None else found.manifest


def _fields(manifest: ExperimentManifest) -> dict[str, Any]:
    document = manifest.document()
    document.pop("format", None)
    return document


def _child(path: str, key: str) -> str:
    if not path:  # a manifest field name
        return key
    if key and not any(c in key for c in '.[]"'):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key)}]"


def _walk(path: str, a: Any, b: Any, out: dict[str, str]) -> None:
    if _is_ref(a) or _is_ref(b):
        out[path] = _reference_status(a, b)
    elif isinstance(a, dict) and isinstance(b, dict) and (a or b):
        for key in sorted(set(a) | set(b)):
            if key in a and key in b:
                _walk(_child(path, key), a[key], b[key], out)
            else:
                out[_child(path, key)] = "missing"
    elif isinstance(a, list) and isinstance(b, list) and (a or b):
        for i in range(max(len(a), len(b))):
            if i < len(a) and i < len(b):
                _walk(f"{path}[{i}]", a[i], b[i], out)
            else:
                out[f"{path}[{i}]"] = "missing"
    else:
        out[path] = "equal" if canonical_bytes(a) == canonical_bytes(b) else "different"


def _is_ref(value: Any) -> bool:
    return is_reference(value) and value["identity"] in KINDS


def _reference_status(a: Any, b: Any) -> str:
    kinds = {x["identity"] if _is_ref(x) else None for x in (a, b)}
    if "unknown" in kinds:
        return "unknown"
    if len(kinds) > 1 or a["value"] != b["value"]:
        return "different"
    return "verified" if kinds == {"digest"} else "declared"
