"""Decision answers as offline teacher records (spec §10.1, docs/decisions.md §9).

A provider's validated Choice / Score answers become ``nnx.teacher-record/1`` objects,
the strict JSONL that nnx-paradigms' ``read_teacher_records`` / ``TeacherDataset``
read: the option (level) ids as the ordered candidates, the probabilities as
validated (never logits, never renormalized), the question's digest as the schema
digest, and the declared provenance (``source``, ``training_rights``: recorded, not
verified). This module writes the documented format itself; it does not import
nnx-paradigms.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from typing import Any

from nnx.decisions.errors import InvalidDecisionRequest
from nnx.decisions.results import ChoiceResult, ScoreResult
from nnx.extend import atomic_write_text

__all__ = ["SEMANTICS", "TEACHER_RECORD_FORMAT", "save_teacher_records", "teacher_records"]

TEACHER_RECORD_FORMAT = "nnx.teacher-record/1"
#: What the probabilities mean (the record format's own list).
SEMANTICS = ("predictive", "calibrated", "empirical")


def _text(name: str, value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidDecisionRequest(f"{name} must be a non-empty string; got {value!r:.60}")
    return value


def teacher_records(answers: Mapping[str, ChoiceResult | ScoreResult] |
                    Iterable[tuple[str, ChoiceResult | ScoreResult]], *, question_id: str,
                    teacher: str, revision: str, source: str, training_rights: str,
                    semantics: str = "predictive") -> list[dict[str, Any]]:
    """One ``nnx.teacher-record/1`` object per ``(sample_id, result)``, in order.

    Every result must answer the same question (one schema digest); a repeated
    sample id, a Boolean answer (no candidate list) or an unknown ``semantics``
    raises InvalidDecisionRequest before any record is made.
    """
    pairs = list(answers.items() if isinstance(answers, Mapping) else answers)
    for name, value in (("question_id", question_id), ("teacher", teacher),
                        ("revision", revision), ("source", source),
                        ("training_rights", training_rights)):
        _text(name, value)
    if semantics not in SEMANTICS:
        raise InvalidDecisionRequest(f"semantics must be one of {SEMANTICS}; got {semantics!r}")
    if not pairs:
        raise InvalidDecisionRequest("no answers to record")
    seen: set[str] = set()
    for sample_id, result in pairs:
        _text("sample_id", sample_id)
        if sample_id in seen:
            raise InvalidDecisionRequest(f"sample id {sample_id!r} is recorded twice")
        seen.add(sample_id)
        if not isinstance(result, (ChoiceResult, ScoreResult)):
            raise InvalidDecisionRequest(f"a teacher record holds a Choice or Score answer; "
                                         f"{sample_id!r} is {type(result).__name__}")
    questions = {r.question for _, r in pairs}
    if len(questions) != 1:
        raise InvalidDecisionRequest("the answers of one record set answer one question; "
                                     f"got {len(questions)}")
    digest = pairs[0][1].question.digest()
    return [{"format": TEACHER_RECORD_FORMAT, "sample_id": sample_id,
             "question_id": question_id, "candidates": list(result.ids),
             "probabilities": list(result.probabilities), "teacher": teacher,
             "revision": revision, "schema_digest": digest, "semantics": semantics,
             "provenance": {"source": source, "training_rights": training_rights}}
            for sample_id, result in pairs]


def save_teacher_records(path: str | os.PathLike[str],
                         records: Iterable[Mapping[str, Any]]) -> None:
    """Write records as strict JSONL (one compact object a line, no NaN), atomically.
    The temp a killed earlier save of the same file stranded (``.<name>.<8 hex>``) is
    removed first: nothing else would (the file lies outside any runs root)."""
    lines = [json.dumps(dict(r), allow_nan=False, separators=(",", ":")) + "\n"
             for r in records]
    atomic_write_text(os.fspath(path), "".join(lines), reclaim=True)
