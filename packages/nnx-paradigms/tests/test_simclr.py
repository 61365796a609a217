"""nt_xent_loss and simclr_train_step_factory (spec §10.2, §6.1)."""

from __future__ import annotations

import copy
import math

import pytest
import torch
from _paradigms_mix_tiny import classifier, plan, same, sgd, sgd_step, weights
from torch import nn

from nnx import Devices, Losses, NNModel, NNModelParams
from nnx.paradigms import nt_xent_loss, simclr_train_step_factory


def embeddings(n: int = 3, d: int = 4, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(n, d, generator=g, dtype=torch.float64),
            torch.randn(n, d, generator=g, dtype=torch.float64))


def cosine(a: torch.Tensor, b: torch.Tensor) -> float:
    return float(a @ b) / (float(a.norm()) * float(b.norm()))


def written_out(z1: torch.Tensor, z2: torch.Tensor, t: float) -> float:
    """SimCLR's ℓ(i, j) averaged over all 2N anchors, one anchor at a time."""
    views = list(z1) + list(z2)
    n = len(z1)
    total = 0.0
    for i in range(2 * n):
        j = (i + n) % (2 * n)
        numerator = math.exp(cosine(views[i], views[j]) / t)
        denominator = sum(math.exp(cosine(views[i], views[k]) / t)
                          for k in range(2 * n) if k != i)
        total += -math.log(numerator / denominator)
    return total / (2 * n)


def metric_learning_convention(z1: torch.Tensor, z2: torch.Tensor, t: float) -> float:
    """pytorch-metric-learning's NTXentLoss, written out: embeddings cat(z1, z2) with
    labels [0..N-1, 0..N-1]; every (anchor, positive) pair of one label, its negatives
    the embeddings of other labels; mean over the positive pairs."""
    emb = torch.cat([z1, z2])
    labels = list(range(len(z1))) * 2
    losses = []
    for a in range(len(emb)):
        for p in range(len(emb)):
            if p == a or labels[p] != labels[a]:
                continue
            pos = math.exp(cosine(emb[a], emb[p]) / t)
            neg = sum(math.exp(cosine(emb[a], emb[k]) / t)
                      for k in range(len(emb)) if labels[k] != labels[a])
            losses.append(-math.log(pos / (pos + neg)))
    return sum(losses) / len(losses)


@pytest.mark.parametrize("t", [0.5, 0.1, 2.0])
def test_nt_xent_equals_the_written_out_formula_and_the_metric_learning_convention(t):
    z1, z2 = embeddings(n=4, d=5, seed=int(10 * t))
    got = float(nt_xent_loss(z1, z2, temperature=t))
    assert got == pytest.approx(written_out(z1, z2, t), abs=1e-6)
    assert got == pytest.approx(metric_learning_convention(z1, z2, t), abs=1e-6)


def test_nt_xent_is_symmetric_scale_invariant_and_defaults_to_half():
    z1, z2 = embeddings()
    loss = nt_xent_loss(z1, z2)
    assert float(loss) == pytest.approx(written_out(z1, z2, 0.5), abs=1e-6)
    torch.testing.assert_close(nt_xent_loss(z2, z1), loss, rtol=0, atol=1e-12)
    torch.testing.assert_close(nt_xent_loss(3 * z1, 0.5 * z2), loss, rtol=0, atol=1e-12)


def test_a_single_pair_has_no_negatives_and_a_zero_loss():
    z1, z2 = embeddings(n=1)
    assert float(nt_xent_loss(z1, z2)) == pytest.approx(0.0, abs=1e-12)


def test_the_loss_is_differentiable_in_both_views():
    z1, z2 = (z.requires_grad_() for z in embeddings())
    nt_xent_loss(z1, z2).backward()
    assert z1.grad is not None and z2.grad is not None
    assert torch.isfinite(z1.grad).all() and z1.grad.abs().sum() > 0


def test_temperature_is_keyword_only_finite_and_positive():
    z1, z2 = embeddings()
    with pytest.raises(TypeError):
        nt_xent_loss(z1, z2, 0.5)  # type: ignore[misc]
    for bad in (0, -0.5, float("nan"), float("inf"), "0.5"):
        with pytest.raises(ValueError, match="nt_xent_loss temperature"):
            nt_xent_loss(z1, z2, temperature=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="simclr_train_step_factory temperature"):
            simclr_train_step_factory(temperature=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        simclr_train_step_factory(0.5)  # type: ignore[misc]


@pytest.mark.parametrize("z1, z2, match", [
    (torch.randn(3, 4), torch.randn(2, 4), "one shape"),
    (torch.randn(0, 4), torch.randn(0, 4), "N >= 1"),
    (torch.randn(3), torch.randn(3), "floating \\(N, D\\)"),
    (torch.ones(3, 4, dtype=torch.long), torch.ones(3, 4, dtype=torch.long), "floating"),
])
def test_bad_embeddings_are_refused(z1, z2, match):
    with pytest.raises(ValueError, match=match):
        nt_xent_loss(z1, z2)


def views(n_batches: int = 2, size: int = 4, seed: int = 3):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n_batches):
        x = torch.randn(size, 3, generator=g)
        out.append((x + 0.1 * torch.randn(size, 3, generator=g),
                    x + 0.1 * torch.randn(size, 3, generator=g)))
    return out


def test_the_step_trains_nt_xent_of_the_two_views_and_reports_no_error(tmp_path):
    batches = views()
    model, ref = classifier(), classifier()
    run = model.train(plan(batches), train_step_fn=simclr_train_step_factory(temperature=0.3),
                      root=tmp_path, verbose=False)
    losses = []
    for v1, v2 in batches:
        loss = nt_xent_loss(ref.net(v1), ref.net(v2), temperature=0.3)
        losses.append(float(loss.detach()))
        sgd_step(ref.net, loss)
    got = [idp.train_edp for idp in run.idps]
    assert [e.loss for e in got] == pytest.approx(losses, abs=1e-6)
    assert all(e.error is None and e.accuracy is None for e in got)
    for name, p in ref.net.state_dict().items():
        torch.testing.assert_close(model.net.state_dict()[name], p, atol=1e-6, rtol=1e-5)
    assert [idp.update_count for idp in run.idps] == [1, 2]


class BNEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.lin(x))


def test_batchnorm_sees_one_view_at_a_time(tmp_path):
    (v1, v2), = views(1, size=5)
    v2 = 3.0 * v2 + 2.0  # views of very different statistics: a joint batch would differ
    torch.manual_seed(0)
    net = BNEncoder()
    ref = copy.deepcopy(net)
    model = NNModel(module=net, params=NNModelParams(device=Devices.CPU,
                                                     loss=Losses.MEAN_SQUARED_ERROR))
    model.train(plan([(v1, v2)], optim=sgd(0.0)), train_step_fn=simclr_train_step_factory(),
                root=tmp_path, verbose=False)
    ref.train()
    with torch.no_grad():
        ref(v1)
        ref(v2)
    assert torch.equal(net.bn.running_mean, ref.bn.running_mean)
    assert torch.equal(net.bn.running_var, ref.bn.running_var)
    assert int(net.bn.num_batches_tracked) == 2


def test_a_label_beside_the_views_is_ignored(tmp_path):
    batches = views()
    labelled = [(v1, v2, torch.arange(len(v1))) for v1, v2 in batches]
    plain, tagged = classifier(), classifier()
    step = simclr_train_step_factory()
    a = plain.train(plan(batches), train_step_fn=step, root=tmp_path / "a", verbose=False)
    b = tagged.train(plan(labelled), train_step_fn=step, root=tmp_path / "b", verbose=False)
    assert [i.train_edp.loss for i in a.idps] == [i.train_edp.loss for i in b.idps]
    assert same(weights(plain), weights(tagged))


@pytest.mark.parametrize("batch, match", [
    (torch.randn(4, 3), "\\(view1, view2\\) or \\(view1, view2, label\\)"),
    ((torch.randn(4, 3),) * 4, "of length 4"),
    ((torch.randn(4, 3), torch.randn(5, 3)), "differ in shape"),
])
def test_a_batch_that_is_not_two_views_is_refused_before_any_update(tmp_path, batch, match):
    model = classifier()
    before = weights(model)
    with pytest.raises(ValueError, match=match):
        model.train(plan([batch]), train_step_fn=simclr_train_step_factory(), root=tmp_path,
                    verbose=False)
    assert same(weights(model), before)
    assert all(p.grad is None for p in model.net.parameters())
