"""Teacher records (spec §10.1): ``nnx.teacher-record/1``, one strict JSON object a line.

A record is one teacher's answer for one sample: the ordered candidate ids and
their probabilities (finite, nonnegative, summing to 1 within 1e-6 — never
logits), the teacher and its revision, the question's schema digest, what the
probabilities mean ("predictive", "calibrated" or "empirical") and its
provenance (``source`` and the declared ``training_rights``; NNx records the
declaration, it does not verify entitlement). Every field is required and no
other key is accepted, so a typo cannot silently drop information.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from nnx.extend import UnsafePathError, atomic_write_text, inside, load_json

__all__ = ["FORMAT", "SEMANTICS", "TeacherRecord", "TeacherRecordError", "read_teacher_records",
           "write_teacher_records"]

FORMAT = "nnx.teacher-record/1"
SEMANTICS = ("predictive", "calibrated", "empirical")
SUM_TOLERANCE = 1e-6
_FIELDS = ("sample_id", "question_id", "candidates", "probabilities", "teacher", "revision",
           "schema_digest", "semantics", "provenance")
_PROVENANCE = ("source", "training_rights")


class TeacherRecordError(ValueError):
    """A teacher record (or a line of a record file) is malformed."""


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise TeacherRecordError(f"TeacherRecord.{name} must be a non-empty string; got "
                                 f"{value!r:.60}")
    return value


@dataclass(frozen=True)
class TeacherRecord:
    """One sample's stored teacher distribution over ordered candidate ids."""

    sample_id: str
    question_id: str
    candidates: tuple[str, ...]
    probabilities: tuple[float, ...]
    teacher: str
    revision: str
    schema_digest: str
    semantics: str
    provenance: Mapping[str, str]

    def __post_init__(self) -> None:
        for name in ("sample_id", "question_id", "teacher", "revision", "schema_digest"):
            _text(name, getattr(self, name))
        if self.semantics not in SEMANTICS:
            raise TeacherRecordError(f"TeacherRecord.semantics must be one of {SEMANTICS} "
                                     f"(probabilities, never logits); got {self.semantics!r}")
        if isinstance(self.candidates, str) or not isinstance(self.candidates, Sequence):
            raise TeacherRecordError("TeacherRecord.candidates must be a sequence of candidate "
                                     f"ids; got {self.candidates!r:.60}")
        candidates = tuple(_text("candidates[]", c) for c in self.candidates)
        if not candidates:
            raise TeacherRecordError("TeacherRecord.candidates must not be empty")
        repeated = sorted({c for c in candidates if candidates.count(c) > 1})
        if repeated:
            raise TeacherRecordError(f"TeacherRecord {self.sample_id!r}: duplicate candidate(s) "
                                     f"{repeated}")
        object.__setattr__(self, "candidates", candidates)
        object.__setattr__(self, "probabilities", self._probabilities(len(candidates)))
        object.__setattr__(self, "provenance", self._provenance())

    def _probabilities(self, n: int) -> tuple[float, ...]:
        raw = self.probabilities
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence) or len(raw) != n:
            raise TeacherRecordError(f"TeacherRecord {self.sample_id!r}: probabilities must be "
                                     f"{n} numbers, one per candidate; got {raw!r:.60}")
        out = []
        for p in raw:
            if isinstance(p, bool) or not isinstance(p, (int, float)):
                raise TeacherRecordError(f"TeacherRecord {self.sample_id!r}: probability {p!r} "
                                         "is not a number")
            try:
                value = float(p)
            except OverflowError:
                raise TeacherRecordError(f"TeacherRecord {self.sample_id!r}: the number {p} is "
                                         "too large for a float") from None
            if not math.isfinite(value) or value < 0:
                raise TeacherRecordError(f"TeacherRecord {self.sample_id!r}: probabilities must "
                                         f"be finite and nonnegative; got {value}")
            out.append(value)
        total = math.fsum(out)
        if abs(total - 1.0) > SUM_TOLERANCE:
            raise TeacherRecordError(f"TeacherRecord {self.sample_id!r}: probabilities sum to "
                                     f"{total!r}, not 1 within {SUM_TOLERANCE}")
        return tuple(out)

    def _provenance(self) -> Mapping[str, str]:
        raw = self.provenance
        if not isinstance(raw, Mapping):
            raise TeacherRecordError(f"TeacherRecord {self.sample_id!r}: provenance must be a "
                                     f"mapping with {_PROVENANCE}; got {type(raw).__name__}")
        keys = set(raw)
        if keys != set(_PROVENANCE):
            raise TeacherRecordError(f"TeacherRecord {self.sample_id!r}: provenance must hold "
                                     f"exactly {_PROVENANCE}; missing "
                                     f"{sorted(set(_PROVENANCE) - keys)}, unknown "
                                     f"{sorted(map(str, keys - set(_PROVENANCE)))}")
        return MappingProxyType({k: _text(f"provenance[{k!r}]", raw[k]) for k in _PROVENANCE})

    def to_json(self) -> dict[str, Any]:
        """The record's ``nnx.teacher-record/1`` object."""
        return {"format": FORMAT, **{f: getattr(self, f) for f in _FIELDS[:-1]},
                "candidates": list(self.candidates), "probabilities": list(self.probabilities),
                "provenance": dict(self.provenance)}

    @classmethod
    def from_json(cls, obj: Any) -> TeacherRecord:
        """A record from its JSON object; a missing, unknown or mistyped field fails."""
        if not isinstance(obj, dict):
            raise TeacherRecordError(f"a teacher record must be a JSON object; got "
                                     f"{type(obj).__name__}")
        if obj.get("format") != FORMAT:
            raise TeacherRecordError(f"format must be {FORMAT!r}; got {obj.get('format')!r}")
        keys = set(obj) - {"format"}
        missing, unknown = set(_FIELDS) - keys, keys - set(_FIELDS)
        if missing or unknown:
            raise TeacherRecordError(f"a teacher record needs exactly the fields {_FIELDS}; "
                                     f"missing {sorted(missing)}, unknown {sorted(unknown)}")
        for name in ("candidates", "probabilities"):
            if not isinstance(obj[name], list):
                raise TeacherRecordError(f"{name} must be a JSON array; got "
                                         f"{type(obj[name]).__name__}")
        return cls(**{f: obj[f] for f in _FIELDS})


def _strict_loads(text: str) -> Any:
    """One record line through core's strict JSON reader: no duplicate key, no NaN /
    Infinity, no number beyond a float's range."""
    return load_json(data=text, where="the record", strict=True)


def read_teacher_records(path: str | os.PathLike[str]) -> list[TeacherRecord]:
    """Every record of an ``nnx.teacher-record/1`` JSONL file, in file order.

    Strict: one JSON object per line (UTF-8), no blank lines, no NaN / Infinity, no
    duplicate keys, no number beyond a float's range. The first malformed line raises
    :class:`TeacherRecordError` naming ``path:line``. A file that is a symbolic link is
    refused naming it (:class:`TeacherRecordError`), never followed: records train a
    student, and a link could make them anything the reader can reach.
    """
    name = os.fspath(path)
    where = Path(name)
    try:
        inside(where.parent, where.name, what="teacher records file")
    except UnsafePathError as exc:
        raise TeacherRecordError(f"{name} is a symbolic link; teacher records are read "
                                 "only from a regular file, never through a link") from exc
    with open(name, encoding="utf-8") as f:
        lines = f.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline ending the last line
    records = []
    for number, line in enumerate(lines, start=1):
        try:
            if not line.strip():
                raise TeacherRecordError("blank line (strict JSONL: one record per line)")
            records.append(TeacherRecord.from_json(_strict_loads(line)))
        except (ValueError, TypeError, OverflowError) as exc:  # JSONDecodeError is one
            raise TeacherRecordError(f"{name}:{number}: {exc}") from exc
    return records


def write_teacher_records(path: str | os.PathLike[str],
                          records: Iterable[TeacherRecord]) -> None:
    """Write ``records`` as ``nnx.teacher-record/1`` JSONL, atomically; the temp a killed
    earlier write of the same file stranded (``.<name>.<8 hex>``) is removed first."""
    rows = []
    for record in records:
        if not isinstance(record, TeacherRecord):
            raise TypeError(f"write_teacher_records needs TeacherRecord values; got "
                            f"{type(record).__name__}")
        rows.append(json.dumps(record.to_json(), allow_nan=False, separators=(",", ":")) + "\n")
    atomic_write_text(os.fspath(path), "".join(rows), reclaim=True)
