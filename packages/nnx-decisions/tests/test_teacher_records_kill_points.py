"""A kill anywhere in ``save_teacher_records`` leaves the previous file or the new one,
never a torn one, and the next save leaves no temp (issue 36 item 3): the stranded
``.teacher.jsonl.<8 hex>`` a kill between the temp's creation and its rename leaves is
recognized and removed by that save. The kill points are the crash-point probe's
(``nnx.testing.writer_kill_points``: every ``os``-level operation, as core's commit
probe cuts an epoch's commit)."""

from __future__ import annotations

from nnx.decisions import Choice, save_teacher_records, teacher_records, validate_response
from nnx.testing import writer_kill_points

ANIMAL = Choice("Which animal?", [("cat", "A cat"), ("dog", "A dog"), ("fox", "A fox")])


def test_every_kill_point_of_save_teacher_records_leaves_old_or_new_and_no_temp(tmp_path):
    answers = {f"s{i}": validate_response(ANIMAL, {"cat": 0.5, "dog": 0.3, "fox": 0.2},
                                          provider="t") for i in range(3)}
    records = teacher_records(answers, question_id="animal", teacher="t", revision="1",
                              source="unit test", training_rights="synthetic")
    path = tmp_path / "teacher.jsonl"
    save_teacher_records(path, records)
    new = path.read_bytes()
    old = b'{"old": true}\n'
    points = writer_kill_points(path, old, lambda: save_teacher_records(path, records))
    assert len(points) >= 3  # the temp's creation, its flush, the rename
    assert all(p["rc"] == 137 for p in points), points
    assert all(p["after_kill"] in (old, new) for p in points), points
    assert [p for p in points if p["temps"]] == []
    assert path.read_bytes() == new
