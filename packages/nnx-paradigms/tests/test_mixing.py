"""mixup_train_step_factory and cutmix_train_step_factory (spec §10.3, §3.1, §6.1)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from _paradigms_mix_tiny import (
    classifier,
    grad_flags,
    image_classifier,
    images,
    plan,
    rows,
    same,
    sgd_step,
    weights,
)

from nnx import Losses
from nnx.paradigms import cutmix_train_step_factory, mixup_train_step_factory
from nnx.paradigms.mixing import cutmix_box


def beta(alpha: float) -> float:
    """The documented draw: λ ~ Beta(α, α) from the global CPU generator (float64)."""
    a = torch.tensor(alpha, dtype=torch.float64)
    return float(torch.distributions.Beta(a, a).sample())


def hand_mixup(net, x, y, alpha):
    lam = beta(alpha)
    perm = torch.randperm(len(x))
    out = net(lam * x + (1 - lam) * x[perm])
    loss = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[perm])
    pred = out.argmax(1)
    acc = (lam * (pred == y).double().sum() + (1 - lam) * (pred == y[perm]).double().sum())
    return lam, loss, float(acc) / len(y)


def hand_cutmix(net, x, y, alpha):
    lam0 = beta(alpha)
    perm = torch.randperm(len(x))
    h, w = x.shape[2], x.shape[3]
    cut = math.sqrt(1 - lam0)
    cw, ch = int(w * cut), int(h * cut)
    cx, cy = int(torch.randint(w, ())), int(torch.randint(h, ()))
    x1, x2 = max(cx - cw // 2, 0), min(cx + cw // 2, w)
    y1, y2 = max(cy - ch // 2, 0), min(cy + ch // 2, h)
    mixed = x.clone()
    mixed[:, :, y1:y2, x1:x2] = x[perm, :, y1:y2, x1:x2]
    lam = 1 - (y2 - y1) * (x2 - x1) / (h * w)
    out = net(mixed)
    loss = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[perm])
    return lam, loss


def test_mixup_loss_is_lambda_weighted_over_both_label_sets(tmp_path):
    batches = rows(3)
    model, ref = classifier(), classifier()
    run = model.train(plan(batches), train_step_fn=mixup_train_step_factory(alpha=0.7),
                      root=tmp_path, verbose=False)
    torch.manual_seed(0)  # the run's seed=0 seeds the global RNG the same way
    expected = []
    for x, y in batches:
        lam, loss, acc = hand_mixup(ref.net, x, y, 0.7)
        expected.append((lam, float(loss.detach()), acc))
        sgd_step(ref.net, loss)
    got = [idp.train_edp for idp in run.idps]
    assert [e.extra["lambda"] for e in got] == [lam for lam, _, _ in expected]
    assert [e.loss for e in got] == pytest.approx([loss for _, loss, _ in expected], abs=1e-6)
    assert [e.accuracy for e in got] == pytest.approx([acc for _, _, acc in expected],
                                                      abs=1e-12)
    for name, p in ref.net.state_dict().items():
        torch.testing.assert_close(model.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)
    assert [idp.update_count for idp in run.idps] == [1, 2, 3]


def test_cutmix_loss_uses_the_box_adjusted_lambda(tmp_path):
    batches = images(3, size=6)
    model, ref = image_classifier(), image_classifier()
    run = model.train(plan(batches), train_step_fn=cutmix_train_step_factory(alpha=1.0),
                      root=tmp_path, verbose=False)
    torch.manual_seed(0)
    expected = []
    for x, y in batches:
        lam, loss = hand_cutmix(ref.net, x, y, 1.0)
        expected.append((lam, float(loss.detach())))
        sgd_step(ref.net, loss)
    got = [idp.train_edp for idp in run.idps]
    assert [e.extra["lambda"] for e in got] == [lam for lam, _ in expected]
    assert [e.loss for e in got] == pytest.approx([loss for _, loss in expected], abs=1e-6)
    for name, p in ref.net.state_dict().items():
        torch.testing.assert_close(model.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("which", ["mixup", "cutmix"])
def test_accuracy_plus_error_is_exactly_one(tmp_path, which):
    if which == "mixup":
        model, data, step = classifier(), rows(6), mixup_train_step_factory(alpha=0.4)
    else:
        model, data, step = image_classifier(), images(6), cutmix_train_step_factory()
    run = model.train(plan(data, n_epochs=2), train_step_fn=step, root=tmp_path,
                      verbose=False)
    edps = [idp.train_edp for idp in run.idps]
    assert len(edps) == 12
    assert all(e.accuracy + e.error == 1.0 for e in edps)
    assert all(0.0 <= e.accuracy <= 1.0 for e in edps)
    assert len({e.accuracy for e in edps}) > 1  # λ-weighted: not a count over 6 rows only


def test_ce_and_nll_students_train_identically_from_the_same_weights(tmp_path):
    for factory, build, data in [(mixup_train_step_factory, classifier, rows(3)),
                                 (cutmix_train_step_factory, image_classifier, images(3))]:
        ce, nll = build(loss=Losses.CROSS_ENTROPY), build(loss=Losses.NEGATIVE_LOG_LIKELIHOOD)
        a = ce.train(plan(data), train_step_fn=factory(), root=tmp_path / "ce", verbose=False)
        b = nll.train(plan(data), train_step_fn=factory(), root=tmp_path / "nll",
                      verbose=False)
        assert [i.train_edp.loss for i in a.idps] == pytest.approx(
            [i.train_edp.loss for i in b.idps], abs=1e-6)
        for name, p in ce.net.state_dict().items():
            torch.testing.assert_close(nll.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)


def test_ignored_targets_leave_the_loss_and_the_accuracy(tmp_path):
    x, y = rows(1)[0]
    y = y.clone()
    y[0] = -100  # CrossEntropyLoss's default ignore_index
    model, ref = classifier(), classifier()
    run = model.train(plan([(x, y)]), train_step_fn=mixup_train_step_factory(),
                      root=tmp_path, verbose=False)
    torch.manual_seed(0)
    lam = beta(0.4)
    perm = torch.randperm(len(x))
    out = ref.net(lam * x + (1 - lam) * x[perm])
    yb = y[perm]
    loss = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, yb)
    pred = out.argmax(1)
    hits = (lam * int(((pred == y) & (y != -100)).sum())
            + (1 - lam) * int(((pred == yb) & (yb != -100)).sum()))
    weight = lam * int((y != -100).sum()) + (1 - lam) * int((yb != -100).sum())
    edp = run.idps[0].train_edp
    assert edp.loss == pytest.approx(float(loss.detach()), abs=1e-6)
    assert edp.accuracy == pytest.approx(hits / weight, abs=1e-12)


def test_the_cutmix_box_lies_inside_the_image_and_keeps_lambda_in_range():
    torch.manual_seed(0)
    for _ in range(300):
        h, w = int(torch.randint(1, 9, ())), int(torch.randint(1, 9, ()))
        lam = float(torch.rand(()))
        y1, y2, x1, x2 = cutmix_box(lam, h, w)
        assert 0 <= y1 <= y2 <= h and 0 <= x1 <= x2 <= w
        kept = 1 - (y2 - y1) * (x2 - x1) / (h * w)
        assert 0.0 <= kept <= 1.0
        assert (y2 - y1) * (x2 - x1) <= h * w * (1 - lam) + 1e-9  # clipping only shrinks it
    y1, y2, x1, x2 = cutmix_box(1.0, 4, 4)
    assert (y2 - y1) * (x2 - x1) == 0  # λ = 1: nothing is pasted


@pytest.mark.parametrize("x", [torch.randn(5, 32), torch.randn(5, 2, 16)])
def test_cutmix_refuses_lower_rank_input_before_anything_changes(tmp_path, x):
    model = classifier()
    before, flags = weights(model), grad_flags(model)
    with pytest.raises(ValueError, match=r"4-D \(B, C, H, W\).*" + str(tuple(x.shape))[1:4]):
        model.train(plan([(x, torch.zeros(5, dtype=torch.long))]),
                    train_step_fn=cutmix_train_step_factory(), root=tmp_path, verbose=False)
    assert same(weights(model), before) and grad_flags(model) == flags
    assert all(p.grad is None for p in model.net.parameters())


@pytest.mark.parametrize("factory", [mixup_train_step_factory, cutmix_train_step_factory])
def test_alpha_is_keyword_only_finite_and_positive(factory):
    for bad in (0, -1.0, float("nan"), float("inf"), "1"):
        with pytest.raises(ValueError, match=f"{factory.__name__} alpha"):
            factory(alpha=bad)
    with pytest.raises(TypeError):
        factory(0.4)


@pytest.mark.parametrize("factory, batch, match", [
    (mixup_train_step_factory, (torch.randn(4, 3),), "no target"),
    (mixup_train_step_factory, (torch.randn(4, 3), torch.rand(4)), "integer class-index"),
    (mixup_train_step_factory, (torch.ones(4, 3, dtype=torch.long),
                                torch.zeros(4, dtype=torch.long)), "floating input"),
    (mixup_train_step_factory, (torch.randn(4, 3), torch.zeros(3, dtype=torch.long)),
     "4 rows"),
    (cutmix_train_step_factory, (torch.randn(4, 2, 4, 4), torch.rand(4)), "integer class"),
])
def test_bad_batches_are_refused_before_any_update(tmp_path, factory, batch, match):
    model = classifier() if batch[0].dim() == 2 else image_classifier()
    before = weights(model)
    with pytest.raises(ValueError, match=match):
        model.train(plan([batch]), train_step_fn=factory(), root=tmp_path, verbose=False)
    assert same(weights(model), before)


@pytest.mark.parametrize("which", ["mixup", "cutmix"])
def test_a_2_plus_1_stateful_resume_equals_3_straight_epochs_bit_for_bit(tmp_path, which):
    data = rows(2) if which == "mixup" else images(2)
    build = classifier if which == "mixup" else image_classifier
    factory = mixup_train_step_factory if which == "mixup" else cutmix_train_step_factory

    def run(root, n_epochs, **kwargs):
        model = build()
        r = model.train(plan(data, n_epochs=n_epochs, **kwargs),
                        train_step_fn=factory(), root=root, verbose=False)
        return model, r

    straight, run3 = run(tmp_path / "straight", 3)
    _, first = run(tmp_path / "resumed", 2)
    resumed, rest = run(tmp_path / "resumed", 1, resume_from_run_id=first.id,
                        resume_mode="stateful")
    assert same(weights(straight), weights(resumed))
    lams = [i.train_edp.extra["lambda"] for i in run3.idps]
    assert [i.train_edp.extra["lambda"] for i in first.idps + rest.idps] == lams
    assert len(set(lams)) > 1  # each batch drew its own λ (CutMix's come in box areas)
