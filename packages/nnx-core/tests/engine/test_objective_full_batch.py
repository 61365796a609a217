"""Objectives against plain full-batch autograd (spec §6.5): KD however the rows are split,
KD at alpha=0, the teacher's own precision, and uneven accumulation equal to one batch."""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from _support.objectives import FP32
from torch import nn

from nnx import (
    NNModel,
    NNModelParams,
    NNTrainParams,
    ObjectiveContext,
    Precision,
    kd_objective,
    supervised_objective,
)
from nnx._contracts.precision import ResolvedPrecision
from nnx._engine.update_engine import OptimizerSlot, UpdateEngine


# -- the engine against plain full-batch autograd ---------------------------------------
def student_teacher():
    torch.manual_seed(1)
    teacher = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 3))
    student = tiny_model(seed=2)
    return student, teacher


def kd_full_batch_grads(student, teacher, x, y, alpha, t):
    net = copy.deepcopy(student.net)
    s = net(x)
    with torch.no_grad():
        q = F.softmax(teacher(x) / t, dim=-1)
    kl = F.kl_div(F.log_softmax(s / t, dim=-1), q, reduction="batchmean") * t * t
    loss = alpha * kl + (1 - alpha) * F.cross_entropy(s, y)
    loss.backward()
    return {n: p.grad.clone() for n, p in net.named_parameters()}


@pytest.mark.parametrize("sizes", [(5, 2, 1), (4, 4), (1, 3, 4)])
def test_kd_objective_equals_the_full_batch_loss_however_the_rows_are_split(sizes):
    student, teacher = student_teacher()
    x, y = torch.cat([b[0] for b in tiny_batches(2)]), torch.cat([b[1] for b in tiny_batches(2)])
    expected = kd_full_batch_grads(student, teacher, x, y, 0.3, 2.5)
    params = list(student.net.parameters())
    before = {n: p.detach().clone() for n, p in student.net.named_parameters()}
    slot = OptimizerSlot(None, torch.optim.SGD(params, lr=1.0), sgd(1.0))
    engine = UpdateEngine(model=student, objective=kd_objective(teacher, 0.3, 2.5), slots=[slot],
                          precision=FP32, scaler=None, accumulate=len(sizes),
                          counter=SimpleNamespace(committed_updates=0),
                          on_commit=lambda e, s: None)
    start = 0
    for i, n in enumerate(sizes):
        engine.microbatch((x[start:start + n], y[start:start + n]), epoch=0, batch_idx=i,
                          closes=i == len(sizes) - 1)
        start += n
    for name, p in student.net.named_parameters():
        torch.testing.assert_close(before[name] - p.detach(), expected[name], atol=1e-6,
                                   rtol=1e-5)


def test_kd_objective_at_alpha_zero_returns_only_the_supervised_term():
    student, teacher = student_teacher()
    objective = kd_objective(teacher, 0.0, 3.0)
    batch = tiny_batches(1)[0]
    ctx = ObjectiveContext(model=student, batch=batch, batch_idx=0, epoch=0, precision=FP32)
    assert [t.name for t in objective(ctx).terms] == ["supervised"]
    assert all(not p.requires_grad for p in teacher.parameters()) and not teacher.training


def test_kd_teacher_runs_in_its_own_precision_not_the_students():
    seen = []

    class Teacher(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 3)

        def forward(self, x):
            seen.append(torch.is_autocast_enabled("cpu"))
            return self.lin(x)

    student = NNModel(net_params=tiny_model().net_params,
                      params=NNModelParams(precision=Precision.BF16))
    objective = kd_objective(Teacher(), 0.5, 2.0)
    ctx = ObjectiveContext(model=student, batch=tiny_batches(1)[0], batch_idx=0, epoch=0,
                           precision=ResolvedPrecision(Precision.BF16, "cpu"))
    with ctx.precision.autocast():
        result = objective(ctx)
    assert seen == [False]
    assert result.terms[0].numerator.dtype == torch.float32


def test_an_objective_with_accumulation_over_uneven_microbatches_equals_one_full_batch(tmp_path):
    batches = tiny_batches(2)
    x, y = torch.cat([b[0] for b in batches]), torch.cat([b[1] for b in batches])
    uneven = [(x[:5], y[:5]), (x[5:7], y[5:7]), (x[7:], y[7:])]
    a, b, c = tiny_model(), tiny_model(), tiny_model()
    a.train(NNTrainParams(n_epochs=3, train_loader=uneven, optim=sgd(0.2, accumulate=3)),
            objective=supervised_objective(), root=tmp_path / "a", verbose=False)
    b.train(NNTrainParams(n_epochs=3, train_loader=[(x, y)], optim=sgd(0.2)),
            objective=supervised_objective(), root=tmp_path / "b", verbose=False)
    c.train(NNTrainParams(n_epochs=3, train_loader=[(x, y)], optim=sgd(0.2)),
            root=tmp_path / "c", verbose=False)
    for (name, pa), pb, pc in zip(a.net.named_parameters(), b.net.parameters(),
                                  c.net.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, atol=1e-6, rtol=1e-5, msg=name)
        torch.testing.assert_close(pb, pc, atol=1e-6, rtol=1e-5, msg=name)
