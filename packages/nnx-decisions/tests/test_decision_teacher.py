"""Decision answers as nnx.teacher-record/1 records (spec §10.1), read back by
nnx-paradigms' read_teacher_records when it is installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nnx.decisions import (
    Choice,
    InvalidDecisionRequest,
    Score,
    save_teacher_records,
    teacher_records,
    validate_response,
)

ANIMAL = Choice("Which animal?", [("cat", "A cat"), ("dog", "A dog"), ("fox", "A fox")])
PROVENANCE = {"teacher": "fixed_head", "revision": "run-1:BEST", "source": "unit test",
              "training_rights": "internal, synthetic"}


def answers() -> dict[str, object]:
    return {f"s{i}": validate_response(ANIMAL, {"fox": 0.1 * i, "dog": 0.5 - 0.1 * i,
                                                "cat": 0.5}, provider="t")
            for i in range(3)}


def test_records_carry_candidates_probabilities_digest_and_provenance() -> None:
    records = teacher_records(answers(), question_id="animal", **PROVENANCE)
    assert [r["sample_id"] for r in records] == ["s0", "s1", "s2"]
    first = records[1]
    assert first["format"] == "nnx.teacher-record/1"
    assert first["candidates"] == ["cat", "dog", "fox"]
    assert first["probabilities"] == [0.5, 0.5 - 0.1, 0.1]
    assert first["schema_digest"] == ANIMAL.digest() and first["semantics"] == "predictive"
    assert first["provenance"] == {"source": "unit test",
                                   "training_rights": "internal, synthetic"}


def test_refusals_before_any_record() -> None:
    other = validate_response(Choice("Other?", ANIMAL.options),
                              {"cat": 1.0, "dog": 0.0, "fox": 0.0}, provider="t")
    boolean = validate_response(__import__("nnx.decisions").decisions.Boolean("b?"), 0.5,
                                provider="t")
    for bad in ([("a", answers()["s0"]), ("a", answers()["s1"])],
                [("a", answers()["s0"]), ("b", other)],
                [("a", boolean)], []):
        with pytest.raises(InvalidDecisionRequest):
            teacher_records(bad, question_id="q", **PROVENANCE)
    with pytest.raises(InvalidDecisionRequest, match="semantics"):
        teacher_records(answers(), question_id="q", semantics="logits", **PROVENANCE)
    with pytest.raises(InvalidDecisionRequest, match="training_rights"):
        teacher_records(answers(), question_id="q", **{**PROVENANCE, "training_rights": ""})


def test_nnx_paradigms_reads_what_is_written(tmp_path: Path) -> None:
    offline = pytest.importorskip("nnx.paradigms.offline_distillation")
    score = Score("How big?", [("small", "Small"), ("large", "Large")])
    path = tmp_path / "teacher.jsonl"
    save_teacher_records(path, teacher_records(answers(), question_id="animal", **PROVENANCE))
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and json.loads(lines[0])["sample_id"] == "s0"
    records = offline.read_teacher_records(path)
    assert [r.candidates for r in records] == [("cat", "dog", "fox")] * 3
    assert records[2].probabilities == tuple(answers()["s2"].probabilities)
    assert records[0].schema_digest == ANIMAL.digest()
    levels = {"x": validate_response(score, {"small": 0.25, "large": 0.75}, provider="t")}
    save_teacher_records(path, teacher_records(levels, question_id="size", **PROVENANCE))
    assert offline.read_teacher_records(path)[0].candidates == ("small", "large")
