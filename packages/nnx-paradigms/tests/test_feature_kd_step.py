"""feature_kd_train_step_factory (spec §10): KD + β · MSE of named activations."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _kd_tiny import batches, classifier, plan, same, weights

from nnx import Devices, Losses, NNModel, NNModelParams, Precision
from nnx._step_helpers import is_full_precision_only
from nnx.objectives.ownership import is_imperative_step
from nnx.paradigms import feature_kd_train_step_factory

LAYERS = {"layers.0": "layers.0"}


def hooks(net):
    return sum(len(m._forward_hooks) for m in net.modules())


def test_the_loss_is_kd_plus_beta_mse_of_the_named_activations_written_out(tmp_path):
    teacher, student, ref = classifier(7), classifier(0), classifier(0)
    data = batches(1)
    alpha, t, beta = 0.4, 3.0, 0.7
    run = student.train(plan(data), train_step_fn=feature_kd_train_step_factory(
        teacher, layers=LAYERS, alpha=alpha, temperature=t, beta=beta), root=tmp_path,
        verbose=False)
    (x, y), = data
    s, tl = ref.net(x), teacher.net(x).detach()
    q = F.softmax(tl / t, 1)
    kl = (q * (q.log() - F.log_softmax(s / t, 1))).sum(1).mean() * t * t
    ce = F.cross_entropy(s, y)
    mse = ((ref.net.layers[0](x) - teacher.net.layers[0](x).detach()) ** 2).mean()
    expected = alpha * kl + (1 - alpha) * ce + beta * mse
    edp = run.idps[0].train_edp
    assert edp.loss == pytest.approx(float(expected.detach()), abs=1e-6)
    assert edp.extra["feature_mse"] == pytest.approx(float(mse.detach()), abs=1e-6)
    ref.net.zero_grad()
    expected.backward()
    with torch.no_grad():
        for p in ref.net.parameters():
            p -= 0.1 * p.grad
    for k, v in weights(ref).items():
        torch.testing.assert_close(weights(student)[k], v, atol=1e-6, rtol=1e-5)


def test_no_hook_outlives_a_step_nor_a_refused_step(tmp_path):
    teacher, student = classifier(7), classifier(0)
    student.train(plan(batches()), train_step_fn=feature_kd_train_step_factory(
        teacher, layers=LAYERS), root=tmp_path / "ok", verbose=False)
    assert hooks(student.net) == 0 and hooks(teacher.net) == 0
    wide = classifier(7, hidden=(8,))
    with pytest.raises(ValueError):
        student.train(plan(batches()), train_step_fn=feature_kd_train_step_factory(
            wide, layers=LAYERS), root=tmp_path / "bad", verbose=False)
    assert hooks(student.net) == 0 and hooks(wide.net) == 0


def test_a_shape_mismatch_is_refused_with_both_shapes_before_any_update(tmp_path):
    teacher, student = classifier(7, hidden=(8,)), classifier(0)
    before, t_before = weights(student), weights(teacher)
    step = feature_kd_train_step_factory(teacher, layers=LAYERS)
    with pytest.raises(ValueError, match=r"student 'layers.0' \(5, 6\) and teacher 'layers.0' "
                                         r"\(5, 8\) differ in shape.*projector"):
        student.train(plan(batches()), train_step_fn=step, root=tmp_path, verbose=False)
    assert same(weights(student), before) and same(weights(teacher), t_before)
    assert all(p.grad is None for p in student.net.parameters())


class HintedStudent(torch.nn.Module):
    """A FitNets student: its ``proj`` regressor maps the 6-wide hint to the teacher's 8."""

    def __init__(self) -> None:
        super().__init__()
        self.body, self.head, self.proj = (torch.nn.Linear(4, 6), torch.nn.Linear(6, 3),
                                           torch.nn.Linear(6, 8))

    def forward(self, x):
        h = torch.relu(self.body(x))
        self.proj(h)  # the hint the step's hook reads; the logits do not depend on it
        return self.head(h)


def test_a_projector_in_the_students_net_bridges_widths(tmp_path):
    teacher = classifier(7, hidden=(8,))
    torch.manual_seed(0)
    student = NNModel(module=HintedStudent(),
                      params=NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))
    before = weights(student)["proj.weight"]
    student.train(plan(batches()), train_step_fn=feature_kd_train_step_factory(
        teacher, layers={"proj": "layers.0"}), root=tmp_path, verbose=False)
    assert not torch.equal(weights(student)["proj.weight"], before)


def test_unknown_module_names_are_refused(tmp_path):
    teacher, student = classifier(7), classifier(0)
    with pytest.raises(ValueError, match=r"the teacher has no module named \['nope'\]"):
        feature_kd_train_step_factory(teacher, layers={"layers.0": "nope"})
    assert all(p.requires_grad for p in teacher.net.parameters())  # refused before freezing
    before = weights(student)
    with pytest.raises(ValueError, match=r"the student has no module named \['nope'\]"):
        student.train(plan(batches()), train_step_fn=feature_kd_train_step_factory(
            teacher, layers={"nope": "layers.0"}), root=tmp_path, verbose=False)
    assert same(weights(student), before)


@pytest.mark.parametrize("layers", [{}, "layers.0", {"layers.0": 1}])
def test_layers_must_be_a_non_empty_name_mapping(layers):
    with pytest.raises(TypeError, match="layers must be a non-empty mapping"):
        feature_kd_train_step_factory(classifier(7), layers=layers)


def test_beta_must_be_nonnegative():
    with pytest.raises(ValueError, match="beta"):
        feature_kd_train_step_factory(classifier(7), layers=LAYERS, beta=-1.0)


def test_ce_and_nll_students_train_identically(tmp_path):
    teacher = classifier(7)
    ce, nll = classifier(0), classifier(0, loss=Losses.NEGATIVE_LOG_LIKELIHOOD)
    step = feature_kd_train_step_factory(teacher, layers=LAYERS)
    ce.train(plan(batches()), train_step_fn=step, root=tmp_path / "ce", verbose=False)
    nll.train(plan(batches()), train_step_fn=step, root=tmp_path / "nll", verbose=False)
    for k, v in weights(ce).items():
        torch.testing.assert_close(weights(nll)[k], v, atol=1e-6, rtol=1e-5)


def test_marked_full_precision_only_and_refused_under_fp16_before_any_run_dir(tmp_path):
    teacher, student = classifier(7), classifier(0, precision=Precision.FP16)
    step = feature_kd_train_step_factory(teacher, layers=LAYERS)
    assert is_full_precision_only(step) and is_imperative_step(step)
    before = weights(student)
    with pytest.raises(ValueError, match="full-precision-only"):
        student.train(plan(batches()), train_step_fn=step, root=tmp_path / "runs",
                      verbose=False)
    assert not (tmp_path / "runs").exists() and same(weights(student), before)


def test_the_teacher_never_changes(tmp_path):
    teacher, student = classifier(7), classifier(0)
    before = weights(teacher)
    student.train(plan(batches(), n_epochs=2), train_step_fn=feature_kd_train_step_factory(
        teacher, layers=LAYERS), root=tmp_path, verbose=False)
    assert same(weights(teacher), before)
