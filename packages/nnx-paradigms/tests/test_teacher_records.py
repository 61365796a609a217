"""TeacherRecord and read_teacher_records (spec §10.1 "Records", "Provenance")."""

from __future__ import annotations

import json
import math

import pytest
from _offline_tiny import PROVENANCE, record, records

from nnx.paradigms.offline_distillation import (
    FORMAT,
    TeacherRecord,
    TeacherRecordError,
    read_teacher_records,
    write_teacher_records,
)

FIELDS = ("sample_id", "question_id", "candidates", "probabilities", "teacher", "revision",
          "schema_digest", "semantics", "provenance")


def line(**overrides):
    obj = record().to_json()
    obj.update(overrides)
    return json.dumps(obj)


def test_records_round_trip_through_strict_jsonl(tmp_path):
    path = tmp_path / "teacher.jsonl"
    written = records(4)
    write_teacher_records(path, written)
    assert read_teacher_records(path) == written
    first = json.loads(path.read_text().splitlines()[0])
    assert first["format"] == FORMAT == "nnx.teacher-record/1"
    assert first["provenance"] == PROVENANCE
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically: no temp left behind


@pytest.mark.parametrize("probabilities, match", [
    ((0.5, float("nan"), 0.5), "finite"),
    ((0.5, float("inf"), 0.5), "finite"),
    ((1.2, -0.2, 0.0), "nonnegative"),
    ((0.5, 0.3, 0.1), "sum to"),
    ((0.5, 0.5), "3 numbers"),
    ((0.5, "0.3", 0.2), "not a number"),
    ((0.5, True, 0.2), "not a number"),
])
def test_probabilities_must_be_finite_nonnegative_and_sum_to_one(probabilities, match):
    with pytest.raises(TeacherRecordError, match=match):
        record(probabilities=probabilities)


def test_the_sum_tolerance_is_1e_6():
    record(probabilities=(0.5, 0.3, 0.2 + 9e-7))
    with pytest.raises(TeacherRecordError, match="sum to"):
        record(probabilities=(0.5, 0.3, 0.2 + 2e-6))


@pytest.mark.parametrize("semantics", ["predictive", "calibrated", "empirical"])
def test_the_three_semantics_are_accepted(semantics):
    assert record(semantics=semantics).semantics == semantics


@pytest.mark.parametrize("semantics", ["logits", "", None])
def test_other_semantics_are_refused(semantics):
    with pytest.raises(TeacherRecordError, match="semantics must be one of"):
        record(semantics=semantics)


@pytest.mark.parametrize("provenance, match", [
    ({"source": "x"}, r"missing \['training_rights'\]"),
    ({"training_rights": "x"}, r"missing \['source'\]"),
    ({**PROVENANCE, "licence": "x"}, r"unknown \['licence'\]"),
    ({**PROVENANCE, "source": ""}, "non-empty string"),
    ("export", "mapping"),
])
def test_provenance_needs_source_and_training_rights(provenance, match):
    with pytest.raises(TeacherRecordError, match=match):
        record(provenance=provenance)


def test_duplicate_or_empty_candidates_are_refused():
    with pytest.raises(TeacherRecordError, match="duplicate candidate"):
        record(candidates=("cat", "cat", "fox"))
    with pytest.raises(TeacherRecordError, match="must not be empty"):
        record(candidates=(), probabilities=())


@pytest.mark.parametrize("field", FIELDS)
def test_a_missing_field_fails_validation_naming_path_and_line(tmp_path, field):
    obj = record().to_json()
    del obj[field]
    path = tmp_path / "t.jsonl"
    path.write_text(line() + "\n" + json.dumps(obj) + "\n")
    with pytest.raises(TeacherRecordError, match=rf"t.jsonl:2: .*missing \['{field}'\]"):
        read_teacher_records(path)


@pytest.mark.parametrize("text, match", [
    ('{"format": ', "Expecting value"),
    (line(probabilities=[0.5, 0.3, 0.2]).replace("0.2]", "1e999]"), "too large for a float"),
    (
        line().replace('"probabilities": [0.5', '"probabilities": [NaN'),
        "holds NaN, which strict JSON does not allow",
    ),
    (line(extra=1), r"unknown \['extra'\]"),
    (line(format="nnx.teacher-record/2"), "format must be"),
    (line()[:-1] + ', "teacher": "again"}', "repeats the key 'teacher'"),
    ("[1, 2]", "JSON object"),
    ("", "blank line"),
    (line(candidates="cat"), "JSON array"),
])
def test_a_malformed_line_raises_naming_path_and_line(tmp_path, text, match):
    path = tmp_path / "teacher.jsonl"
    path.write_text(line() + "\n" + line(sample_id="s1") + "\n" + text + "\n")
    with pytest.raises(TeacherRecordError, match=rf"teacher.jsonl:3: .*{match}"):
        read_teacher_records(path)


def test_an_integer_too_large_for_a_float_is_refused(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(line().replace("0.5", "1" + "0" * 400, 1) + "\n")
    with pytest.raises(TeacherRecordError, match=r"t\.jsonl:1: .*too large for a float"):
        read_teacher_records(path)


def test_the_record_is_frozen_and_normalizes_its_sequences():
    r = record(candidates=["cat", "dog", "fox"], probabilities=[0.5, 0.3, 0.2])
    assert r.candidates == ("cat", "dog", "fox") and r.probabilities == (0.5, 0.3, 0.2)
    with pytest.raises(AttributeError):
        r.sample_id = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        r.provenance["source"] = "x"  # type: ignore[index]
    assert math.isclose(sum(r.probabilities), 1.0)


def test_write_refuses_anything_but_records(tmp_path):
    with pytest.raises(TypeError, match="TeacherRecord"):
        write_teacher_records(tmp_path / "t.jsonl", [{"sample_id": "s0"}])
    assert not (tmp_path / "t.jsonl").exists()
    assert isinstance(records(1)[0], TeacherRecord)


# -- untrusted input and kill points (issue 36 item 3) ------------------------------------
def test_a_records_file_that_is_a_symbolic_link_is_refused_naming_it(tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    write_teacher_records(target, records(2))  # valid: following the link would read it
    link = tmp_path / "teacher.jsonl"
    link.symlink_to(target)
    with pytest.raises(TeacherRecordError, match=r"teacher\.jsonl is a symbolic link"):
        read_teacher_records(link)


TAMPERED = {
    "a probability changed": (lambda t: t.replace("0.5,", "0.6,", 1), "sum to"),
    "a key repeated": (lambda t: t.replace('{"format"', '{"teacher":"x","format"', 1),
                       "repeats the key"),
    "a field added": (lambda t: t.replace('{"format"', '{"extra":1,"format"', 1), "unknown"),
    "the last line cut": (lambda t: t[:-20], r"teacher\.jsonl:2"),
}


@pytest.mark.parametrize("case", sorted(TAMPERED))
def test_a_tampered_records_file_is_refused_naming_path_and_line(tmp_path, case):
    change, match = TAMPERED[case]
    path = tmp_path / "teacher.jsonl"
    write_teacher_records(path, [record("s0"), record("s1")])
    path.write_text(change(path.read_text()))
    with pytest.raises(TeacherRecordError, match=match):
        read_teacher_records(path)


def test_every_kill_point_of_write_teacher_records_leaves_old_or_new_and_no_temp(tmp_path):
    from nnx.testing import writer_kill_points

    path = tmp_path / "teacher.jsonl"
    written = records(3)
    write_teacher_records(path, written)
    new, old = path.read_bytes(), b"{}\n"
    points = writer_kill_points(path, old, lambda: write_teacher_records(path, written))
    assert points and all(p["rc"] == 137 and p["after_kill"] in (old, new) for p in points)
    assert [p for p in points if p["temps"]] == []
    assert read_teacher_records(path) == written
