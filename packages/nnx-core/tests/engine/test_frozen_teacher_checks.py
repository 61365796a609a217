"""FrozenTeacher's per-batch shortcuts (issue 31): a student checked once per net, the
teacher's modes read rather than rewritten each batch. Each keeps its refusal."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from nnx.extend import FrozenTeacher


def _net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 3))


def test_check_student_once_checks_each_new_net() -> None:
    teacher = FrozenTeacher(_net(0), "t")
    teacher.freeze()
    student = _net(1)
    teacher.check_student_once(student)  # passes, and is remembered
    teacher.check_student_once(student)
    sharing = nn.Sequential(teacher.net[0], nn.Linear(8, 3))  # a different net: checked
    with pytest.raises(ValueError, match="shares parameters"):
        teacher.check_student_once(sharing)
    # The refusal thawed the teacher, as check_student's does.
    assert all(p.requires_grad for p in teacher.net.parameters())
    assert teacher.net.training


def test_a_refusal_forgets_the_net_that_passed() -> None:
    teacher = FrozenTeacher(_net(0), "t")
    student = _net(1)
    teacher.check_student_once(student)
    with pytest.raises(ValueError, match="own net"):
        teacher.check_student(teacher.net)
    # check_student (the run's check) always runs in full, and a refusal clears the memo.
    assert teacher._passed is None


def test_check_student_always_checks_in_full() -> None:
    teacher = FrozenTeacher(_net(0), "t")
    student = _net(1)
    teacher.check_student_once(student)
    student[0] = teacher.net[0]  # the same net object, now sharing a layer
    with pytest.raises(ValueError, match="shares parameters"):
        teacher.check_student(student)


def test_logits_put_a_flipped_submodule_back_in_eval() -> None:
    teacher = FrozenTeacher(_net(0), "t")
    teacher.freeze()
    x = torch.randn(5, 4)
    first = teacher.logits(x)
    teacher.net[1].train()  # only a submodule flipped (the root still reads eval)
    assert torch.equal(teacher.logits(x), first)  # dropout stayed off
    assert not any(m.training for m in teacher.net.modules())


def test_logits_leave_the_students_autocast() -> None:
    teacher = FrozenTeacher(_net(0), "t")
    teacher.freeze()
    x = torch.randn(5, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = teacher.logits(x)
    assert inside.dtype == torch.float32
    assert torch.equal(inside, teacher.logits(x))
