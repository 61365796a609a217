"""moe_train_step_factory (spec §10): the supervised loss + aux_weight × Σ per-layer Switch
load-balancing losses of nnx-core's MoELinear, pooled over every routed row (token)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from _paradigms_mix_tiny import (
    classifier,
    grad_flags,
    moe_classifier,
    plan,
    rows,
    same,
    sgd_step,
    weights,
)

from nnx import Losses, MoELinear
from nnx.paradigms import moe_train_step_factory


def switch_by_hand(layer: MoELinear, x: torch.Tensor) -> float:
    """num_experts · Σ_i f_i · P_i over the rows of x, one row at a time."""
    rows_ = x.reshape(-1, layer.in_features)
    e = layer.num_experts
    counts, prob_sums = [0] * e, [0.0] * e
    with torch.no_grad():
        for r in rows_:
            probs = torch.softmax(layer.router(r), dim=-1).tolist()
            counts[max(range(e), key=lambda i: probs[i])] += 1
            for i in range(e):
                prob_sums[i] += probs[i]
    n = len(rows_)
    return e * sum((counts[i] / n) * (prob_sums[i] / n) for i in range(e))


def test_the_switch_loss_equals_the_hand_computation():
    torch.manual_seed(0)
    layer = MoELinear(3, 2, num_experts=4, top_k=2)
    x = torch.randn(7, 3)
    layer(x)
    assert float(layer.last_aux_loss.detach()) == pytest.approx(switch_by_hand(layer, x), abs=1e-6)


def test_the_switch_loss_is_pooled_over_every_token_not_averaged_per_sequence():
    torch.manual_seed(1)
    layer = MoELinear(3, 2, num_experts=3, top_k=1)
    seqs = torch.randn(2, 5, 3)  # (batch, tokens, features)
    layer(seqs)
    pooled = float(layer.last_aux_loss.detach())
    assert pooled == pytest.approx(switch_by_hand(layer, seqs), abs=1e-6)
    layer(seqs.reshape(10, 3))
    assert float(layer.last_aux_loss.detach()) == pytest.approx(pooled, abs=1e-7)
    per_sequence = sum(switch_by_hand(layer, s) for s in seqs) / 2
    assert per_sequence != pytest.approx(pooled, abs=1e-4)  # the variants differ here


def hand_moe_step(model, x, y, aux_weight, lr=0.1):
    net = model.net
    out = net(x)
    layers = [m for m in net.modules() if isinstance(m, MoELinear)]
    aux = sum(layer.last_aux_loss for layer in layers)
    ce = F.cross_entropy(out, y)
    loss = ce + aux_weight * aux
    values = float(loss.detach()), float(ce.detach()), float(aux.detach())
    pred = out.argmax(1)
    sgd_step(net, loss, lr)
    return values, float((pred == y).double().mean())


def test_the_step_adds_the_weighted_sum_of_every_layers_switch_loss(tmp_path):
    batches = rows(3)
    model, ref = moe_classifier(), moe_classifier()
    assert sum(isinstance(m, MoELinear) for m in model.net.modules()) == 2
    run = model.train(plan(batches), train_step_fn=moe_train_step_factory(aux_weight=0.5),
                      root=tmp_path, verbose=False)
    expected = [hand_moe_step(ref, x, y, 0.5) for x, y in batches]
    got = [idp.train_edp for idp in run.idps]
    assert [e.loss for e in got] == pytest.approx([v[0] for v, _ in expected], abs=1e-6)
    assert [e.extra["task_loss"] for e in got] == pytest.approx(
        [v[1] for v, _ in expected], abs=1e-6)
    assert [e.extra["aux_loss"] for e in got] == pytest.approx(
        [v[2] for v, _ in expected], abs=1e-6)
    assert [e.accuracy for e in got] == [acc for _, acc in expected]
    assert all(e.accuracy + e.error == 1.0 for e in got)
    for name, p in ref.net.state_dict().items():
        torch.testing.assert_close(model.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)
    assert [idp.update_count for idp in run.idps] == [1, 2, 3]


def test_the_aux_loss_trains_the_routers(tmp_path):
    batches = rows(2)
    a, b = moe_classifier(), moe_classifier()
    a.train(plan(batches), train_step_fn=moe_train_step_factory(aux_weight=0.0),
            root=tmp_path / "a", verbose=False)
    b.train(plan(batches), train_step_fn=moe_train_step_factory(aux_weight=1.0),
            root=tmp_path / "b", verbose=False)
    router = "layers.0.router.weight"
    assert not torch.equal(a.net.state_dict()[router], b.net.state_dict()[router])


def test_at_aux_weight_zero_the_step_trains_as_the_default_supervised_step(tmp_path):
    batches = rows(2)
    moe, default = moe_classifier(), moe_classifier()
    moe.train(plan(batches), train_step_fn=moe_train_step_factory(aux_weight=0.0),
              root=tmp_path / "moe", verbose=False)
    default.train(plan(batches), root=tmp_path / "default", verbose=False)
    for name, p in default.net.state_dict().items():
        torch.testing.assert_close(moe.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)


def test_ce_and_nll_students_train_identically_from_the_same_weights(tmp_path):
    batches = rows(2)
    ce, nll = moe_classifier(), moe_classifier(loss=Losses.NEGATIVE_LOG_LIKELIHOOD)
    a = ce.train(plan(batches), train_step_fn=moe_train_step_factory(), root=tmp_path / "a",
                 verbose=False)
    b = nll.train(plan(batches), train_step_fn=moe_train_step_factory(), root=tmp_path / "b",
                  verbose=False)
    assert [i.train_edp.loss for i in a.idps] == pytest.approx(
        [i.train_edp.loss for i in b.idps], abs=1e-6)
    for name, p in ce.net.state_dict().items():
        torch.testing.assert_close(nll.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)


def test_a_net_without_moe_layers_is_refused_before_any_update(tmp_path):
    model = classifier()
    before, flags = weights(model), grad_flags(model)
    with pytest.raises(ValueError, match="no MoELinear layer"):
        model.train(plan(rows(1)), train_step_fn=moe_train_step_factory(), root=tmp_path,
                    verbose=False)
    assert same(weights(model), before) and grad_flags(model) == flags


def test_aux_weight_is_keyword_only_finite_and_non_negative():
    for bad in (-0.1, float("nan"), float("inf"), "0.1"):
        with pytest.raises(ValueError, match="moe_train_step_factory aux_weight"):
            moe_train_step_factory(aux_weight=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        moe_train_step_factory(0.1)  # type: ignore[misc]
    assert moe_train_step_factory(aux_weight=0).aux_weight == 0.0  # type: ignore[attr-defined]
