"""kd_train_step_factory (spec §10.1, §6.1, §3.1): the Hinton loss through finalize_step."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _kd_tiny import batches, classifier, plan, same, sgd, weights

from nnx import Losses, Precision, kd_objective
from nnx._step_helpers import is_full_precision_only
from nnx.objectives.ownership import is_imperative_step
from nnx.paradigms import feature_kd_train_step_factory, kd_train_step_factory

ALPHA, T = 0.3, 2.5


def written_out(student_logits, teacher_logits, y, alpha=ALPHA, t=T):
    """α · KL(softmax(t/T) ‖ softmax(s/T)) · T² + (1 − α) · CE, by hand."""
    q = torch.softmax(teacher_logits / t, dim=1)
    log_p = torch.log_softmax(student_logits / t, dim=1)
    kl = (q * (q.log() - log_p)).sum(dim=1).mean()
    ce = -torch.log_softmax(student_logits, dim=1)[torch.arange(len(y)), y].mean()
    return alpha * kl * t * t + (1 - alpha) * ce


def sgd_step(model, loss, lr=0.1):
    model.net.zero_grad()
    loss.backward()
    with torch.no_grad():
        for p in model.net.parameters():
            p -= lr * p.grad


def test_the_loss_is_alpha_kl_t2_plus_one_minus_alpha_ce_written_out(tmp_path):
    teacher, student, ref = classifier(7, hidden=(8,)), classifier(0), classifier(0)
    data = batches(1)
    run = student.train(plan(data), train_step_fn=kd_train_step_factory(
        teacher, alpha=ALPHA, temperature=T), root=tmp_path, verbose=False)
    (x, y), = data
    expected = written_out(ref.net(x), teacher.net(x).detach(), y)
    edp = run.idps[0].train_edp
    assert edp.loss == pytest.approx(float(expected.detach()), abs=1e-6)
    sgd_step(ref, expected)
    for k, v in weights(ref).items():
        torch.testing.assert_close(weights(student)[k], v, atol=1e-6, rtol=1e-5)
    assert edp.error is not None and edp.accuracy == pytest.approx(1 - edp.error)
    assert set(edp.extra) == {"distillation", "hard"}


def test_the_record_error_is_the_students_top1_error_before_the_update(tmp_path):
    teacher, student = classifier(7, hidden=(8,)), classifier(0)
    data = batches(1, size=10)
    (x, y), = data
    miss = float((student.net(x).argmax(1) != y).float().mean())
    run = student.train(plan(data), train_step_fn=kd_train_step_factory(teacher), root=tmp_path,
                        verbose=False)
    assert run.idps[0].train_edp.error == pytest.approx(miss)


def test_the_step_equals_kd_objective_on_one_batch(tmp_path):
    teacher = classifier(7, hidden=(8,))
    data = batches(1)
    a, b = classifier(0), classifier(0)
    run_a = a.train(plan(data), train_step_fn=kd_train_step_factory(teacher, alpha=ALPHA,
                    temperature=T), root=tmp_path / "a", verbose=False)
    run_b = b.train(plan(data), objective=kd_objective(teacher, alpha=ALPHA, temperature=T),
                    root=tmp_path / "b", verbose=False)
    assert run_a.idps[0].train_edp.loss == pytest.approx(run_b.idps[0].train_edp.loss, abs=1e-6)
    for k, v in weights(a).items():
        torch.testing.assert_close(weights(b)[k], v, atol=1e-6, rtol=1e-5)


def test_kd_objective_over_uneven_microbatches_equals_the_step_on_the_full_batch(tmp_path):
    teacher = classifier(7, hidden=(8,))
    (x, y), = batches(1, size=5)
    full, split = classifier(0), classifier(0)
    full.train(plan([(x, y)]), train_step_fn=kd_train_step_factory(teacher, alpha=ALPHA,
               temperature=T), root=tmp_path / "full", verbose=False)
    split.train(plan([(x[:3], y[:3]), (x[3:], y[3:])], optim=sgd(accumulate=2)),
                objective=kd_objective(teacher, alpha=ALPHA, temperature=T),
                root=tmp_path / "split", verbose=False)
    for k, v in weights(full).items():
        torch.testing.assert_close(weights(split)[k], v, atol=1e-6, rtol=1e-5)


def test_the_teacher_never_changes_and_stays_frozen_in_eval(tmp_path):
    teacher, student = classifier(7, hidden=(8,)), classifier(0)
    teacher.net.train()
    before = weights(teacher)
    step = kd_train_step_factory(teacher)
    assert not teacher.net.training and not any(p.requires_grad for p in teacher.net.parameters())
    student.train(plan(batches(), n_epochs=2), train_step_fn=step, root=tmp_path, verbose=False)
    assert same(weights(teacher), before)
    assert all(p.grad is None for p in teacher.net.parameters())
    assert not teacher.net.training


def test_an_nn_module_teacher_is_accepted(tmp_path):
    teacher, student = classifier(7, hidden=(8,)), classifier(0)
    before = weights(teacher)
    student.train(plan(batches()), train_step_fn=kd_train_step_factory(teacher.net),
                  root=tmp_path, verbose=False)
    assert same(weights(teacher), before)


def test_ce_and_nll_students_train_identically(tmp_path):
    teacher = classifier(7, hidden=(8,))
    ce, nll = classifier(0), classifier(0, loss=Losses.NEGATIVE_LOG_LIKELIHOOD)
    step = kd_train_step_factory(teacher, alpha=ALPHA, temperature=T)
    run_ce = ce.train(plan(batches(), n_epochs=2), train_step_fn=step, root=tmp_path / "ce",
                      verbose=False)
    run_nll = nll.train(plan(batches(), n_epochs=2), train_step_fn=step, root=tmp_path / "nll",
                        verbose=False)
    assert [i.train_edp.loss for i in run_ce.idps] == pytest.approx(
        [i.train_edp.loss for i in run_nll.idps], abs=1e-6)
    for k, v in weights(ce).items():
        torch.testing.assert_close(weights(nll)[k], v, atol=1e-6, rtol=1e-5)


def test_alpha_zero_is_the_supervised_default_step(tmp_path):
    teacher = classifier(7, hidden=(8,))
    kd, plain = classifier(0), classifier(0)
    kd.train(plan(batches()), train_step_fn=kd_train_step_factory(teacher, alpha=0.0),
             root=tmp_path / "kd", verbose=False)
    plain.train(plan(batches()), root=tmp_path / "plain", verbose=False)
    for k, v in weights(plain).items():
        torch.testing.assert_close(weights(kd)[k], v, atol=1e-6, rtol=1e-5)


def test_the_step_is_marked_full_precision_only_and_imperative():
    step = kd_train_step_factory(classifier(7))
    assert is_full_precision_only(step) and is_imperative_step(step)
    assert step.alpha == 0.5 and step.temperature == 4.0  # the spec's defaults


@pytest.mark.parametrize("policy", [Precision.FP16, Precision.BF16])
def test_a_reduced_precision_run_refuses_before_any_run_dir(tmp_path, policy):
    teacher, student = classifier(7), classifier(0, precision=policy)
    step = kd_train_step_factory(teacher)
    before, t_before, rng = weights(student), weights(teacher), torch.get_rng_state()
    with pytest.raises(ValueError, match=rf"full-precision-only.*{policy.name}"):
        student.train(plan(batches()), train_step_fn=step, root=tmp_path / "runs",
                      verbose=False)
    assert not (tmp_path / "runs").exists()
    assert same(weights(student), before) and same(weights(teacher), t_before)
    assert torch.equal(torch.get_rng_state(), rng)
    assert all(p.requires_grad for p in student.net.parameters())


def test_passing_the_step_as_objective_is_refused_before_anything_runs(tmp_path):
    teacher, student = classifier(7), classifier(0)
    before = weights(student)
    with pytest.raises(TypeError, match="imperative step"):
        student.train(plan(batches()), objective=kd_train_step_factory(teacher),
                      root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists() and same(weights(student), before)


def test_accumulation_is_refused_without_an_update(tmp_path):
    teacher, student = classifier(7), classifier(0)
    before = weights(student)
    with pytest.raises(ValueError, match="accumulate_grad_batches=2"):
        student.train(plan(batches(), optim=sgd(accumulate=2)),
                      train_step_fn=kd_train_step_factory(teacher), root=tmp_path, verbose=False)
    assert same(weights(student), before)
    assert all(p.grad is None for p in student.net.parameters())


def flags(*nets):
    """Every requires_grad flag and module mode of ``nets``, in order."""
    return [([p.requires_grad for p in n.parameters()], [m.training for m in n.modules()])
            for n in nets]


def _student_as_teacher():
    student = classifier(0)
    return student, student


def _teacher_sharing_a_layer():
    student, teacher = classifier(0), torch.nn.Sequential()
    teacher.add_module("shared", student.net.layers[0])  # the student's own first layer
    teacher.add_module("head", torch.nn.Linear(6, 3))
    return student, teacher


def _feature_kd(teacher):
    hinted = "shared" if isinstance(teacher, torch.nn.Sequential) else "layers.0"
    return feature_kd_train_step_factory(teacher, layers={"layers.0": hinted})


@pytest.mark.parametrize("factory", [kd_train_step_factory, _feature_kd])
@pytest.mark.parametrize("setup, match", [
    (_student_as_teacher, "must not be the student's own net"),
    (_teacher_sharing_a_layer, "shares parameters with the student"),
])
def test_a_mistaken_teacher_is_refused_with_every_flag_and_mode_unchanged(tmp_path, factory,
                                                                          setup, match):
    """The one check kd_objective runs, before the optimizer is built: the student as
    its own teacher is not frozen into 'no trainable parameters', and a shared layer is
    not left frozen in the student."""
    student, teacher = setup()
    student.net.train()
    teacher_net = getattr(teacher, "net", teacher)
    teacher_net.train()
    student.net.layers[-1].eval()  # a mixed mode must come back exactly
    before, w_before = flags(student.net, teacher_net), weights(student)
    step = factory(teacher)
    with pytest.raises(ValueError, match=match):
        student.train(plan(batches()), train_step_fn=step, root=tmp_path / "runs", verbose=False)
    assert flags(student.net, teacher_net) == before
    assert same(weights(student), w_before) and not (tmp_path / "runs").exists()


def test_the_teacher_stays_frozen_on_call_for_an_accepted_student(tmp_path):
    """Only a refusal undoes the on-call freeze (§10.1)."""
    teacher, student = classifier(7, hidden=(8,)), classifier(0)
    step = kd_train_step_factory(teacher)
    student.train(plan(batches()), train_step_fn=step, root=tmp_path, verbose=False)
    assert not any(p.requires_grad for p in teacher.net.parameters())
    assert all(p.requires_grad for p in student.net.parameters())


def test_a_two_input_or_unlabelled_batch_is_refused_before_any_update(tmp_path):
    teacher, student = classifier(7), classifier(0)
    before = weights(student)
    with pytest.raises(ValueError, match=r"\(X, Y\)"):
        student.train(plan([torch.randn(4, 4)]), train_step_fn=kd_train_step_factory(teacher),
                      root=tmp_path, verbose=False)
    assert same(weights(student), before)


@pytest.mark.parametrize("kwargs, error, match", [
    ({"alpha": 1.5}, ValueError, "alpha"),
    ({"alpha": float("nan")}, ValueError, "alpha"),
    ({"temperature": 0.0}, ValueError, "temperature"),
    ({"temperature": -1.0}, ValueError, "temperature"),
])
def test_bad_knobs_are_refused_before_the_teacher_is_frozen(kwargs, error, match):
    teacher = classifier(7)
    with pytest.raises(error, match=match):
        kd_train_step_factory(teacher, **kwargs)
    assert all(p.requires_grad for p in teacher.net.parameters())


def test_a_teacher_that_is_no_module_is_refused():
    with pytest.raises(TypeError, match=r"NNModel or an nn\.Module"):
        kd_train_step_factory("teacher")


def test_a_shape_mismatch_between_teacher_and_student_is_refused(tmp_path):
    teacher = torch.nn.Linear(4, 5)
    student = classifier(0)
    before = weights(student)
    with pytest.raises(ValueError, match=r"teacher's output \(5, 5\).*\(5, 3\)"):
        student.train(plan(batches()), train_step_fn=kd_train_step_factory(teacher),
                      root=tmp_path, verbose=False)
    assert same(weights(student), before)


def test_kl_div_batchmean_matches_the_written_out_kl():
    s, t = torch.randn(4, 3), torch.randn(4, 3)
    got = F.kl_div(F.log_softmax(s / T, 1), F.softmax(t / T, 1), reduction="batchmean")
    q = F.softmax(t / T, 1)
    assert float(got) == pytest.approx(float((q * (q.log() - F.log_softmax(s / T, 1))).sum(1)
                                             .mean()), abs=1e-7)


def test_a_non_finite_batch_is_never_back_propagated(tmp_path):
    teacher, student = classifier(7), classifier(0)
    good = batches(2)
    poisoned = [(torch.full((5, 4), float("nan")), good[0][1]), good[1]]
    with pytest.warns(RuntimeWarning, match="non-finite training loss"):
        run = student.train(plan(poisoned), train_step_fn=kd_train_step_factory(teacher),
                            root=tmp_path, verbose=False)
    assert [idp.update_count for idp in run.idps] == [0, 1]


def test_the_grad_clip_norm_is_honored(tmp_path):
    from nnx import NNOptimParams

    teacher, clipped = classifier(7), classifier(0)
    start = weights(clipped)
    optim = NNOptimParams.builder().sgd(max_lr=1.0).grad_clip(1e-3).build()
    clipped.train(plan(batches(1), optim=optim), train_step_fn=kd_train_step_factory(teacher),
                  root=tmp_path, verbose=False)
    moved = torch.cat([(weights(clipped)[k] - v).flatten() for k, v in start.items()])
    assert float(moved.norm()) == pytest.approx(1e-3, rel=1e-3)


@pytest.mark.parametrize("factory", ["kd", "feature_kd"])
@pytest.mark.parametrize("bad", [torch.tensor([0, 1, 3, 2, 0]), torch.tensor([0, -2, 1, 2, 0]),
                                 torch.zeros(5, 2)],
                         ids=["index-too-high", "negative-index", "float-wrong-shape"])
def test_a_bad_target_is_refused_with_task_validation_error_before_any_update(tmp_path, factory,
                                                                              bad):
    # The hard term goes through the task adapter's fast path (torch's mean, labels
    # counted at the commit): a class index out of range must still be refused, by name,
    # before the first update — also when it is the second batch of the run.
    from nnx import TaskValidationError

    teacher, student = classifier(7), classifier(0)
    before, t_before = weights(student), weights(teacher)
    step = (kd_train_step_factory(teacher) if factory == "kd" else
            feature_kd_train_step_factory(teacher, layers={"layers.0": "layers.0"}))
    x = batches(1)[0][0]
    with pytest.raises(TaskValidationError):
        student.train(plan([(x, bad)]), train_step_fn=step, root=tmp_path, verbose=False)
    assert same(weights(student), before) and same(weights(teacher), t_before)
    assert all(p.grad is None for p in student.net.parameters())


def test_every_target_ignored_trains_on_the_soft_term_alone(tmp_path):
    # An all-ignored batch has no hard term: an exact 0 (never 0/0), so the update is
    # α · KL · T² alone and the record has no error to report.
    teacher, student, ref = classifier(7, hidden=(8,)), classifier(0), classifier(0)
    x = batches(1)[0][0]
    y = torch.full((5,), -100)
    run = student.train(plan([(x, y)]), train_step_fn=kd_train_step_factory(
        teacher, alpha=ALPHA, temperature=T), root=tmp_path, verbose=False)
    q = torch.softmax(teacher.net(x).detach() / T, 1)
    soft = (q * (q.log() - torch.log_softmax(ref.net(x) / T, 1))).sum(1).mean() * T * T
    expected = ALPHA * soft
    edp = run.idps[0].train_edp
    assert edp.loss == pytest.approx(float(expected.detach()), abs=1e-6)
    assert edp.extra["hard"] == 0.0 and edp.error is None
    assert edp.extra["distillation"] == pytest.approx(float(soft.detach()), abs=1e-6)
    sgd_step(ref, expected)
    for k, v in weights(ref).items():
        torch.testing.assert_close(weights(student)[k], v, atol=1e-6, rtol=1e-5)
