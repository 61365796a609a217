"""nnx.lr_finder (spec §13.1): the sweep, its suggestion, its early stop, and the
non-destructive contract: afterwards (also after an error) every parameter, buffer,
submodule mode, the loader's generators and the Python / NumPy / torch RNG streams equal
their values before it."""

from __future__ import annotations

import inspect
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import plotly.io as pio
import pytest
import torch
import torch.nn.functional as F
from _viz_tiny import assert_same, feed_forward, hide, mixed, snapshot
from torch import nn
from torch.utils.data import DataLoader, RandomSampler, TensorDataset

import nnx
from nnx.lr_finder import LRFinderResult, LRSweepError, lr_finder, lr_range_test
from nnx.lr_finder.curve import Smoother, steepest_descent
from nnx.lr_finder.restore import loader_generators


def classes(n: int = 64) -> TensorDataset:
    g = torch.Generator().manual_seed(3)
    return TensorDataset(torch.randn(n, 4, generator=g), torch.randint(0, 3, (n,), generator=g))


def regression(batch_size: int = 256) -> DataLoader:
    """A noisy linear target in one full batch, so the loss curve is smooth (and the
    noise keeps a gradient at the best fit: a noiseless fit can reach a zero loss, where
    no rate moves the weights and nothing diverges)."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 4, generator=g)
    y = x @ torch.randn(4, 1, generator=g) + 0.1 * torch.randn(256, 1, generator=g)
    return DataLoader(TensorDataset(x, y), batch_size=batch_size)


def linear() -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(4, 1)


def world(loader: Any) -> dict[str, Any]:
    """The RNG streams and the loader's generator states."""
    return {"python": random.getstate(), "numpy": np.random.get_state(),
            "torch": torch.get_rng_state(),
            "loader": [g.get_state() for g in loader_generators(loader)]}


def assert_same_world(loader: Any, before: dict[str, Any]) -> None:
    after = world(loader)
    assert after["python"] == before["python"]
    np.testing.assert_equal(after["numpy"], before["numpy"])
    assert torch.equal(after["torch"], before["torch"])
    assert len(after["loader"]) == len(before["loader"])
    for now, then in zip(after["loader"], before["loader"], strict=True):
        assert torch.equal(now, then)


def loaders() -> list[DataLoader]:
    data = classes()
    return [
        # The DataLoader's own generator (shuffle=True hands it to its RandomSampler).
        DataLoader(data, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(1)),
        # A sampler with a generator of its own.
        DataLoader(data, batch_size=8,
                   sampler=RandomSampler(data, generator=torch.Generator().manual_seed(2))),
    ]


@pytest.mark.parametrize("which", [0, 1])
def test_after_the_sweep_every_state_equals_its_value_before(which):
    loader = loaders()[which]
    assert loader_generators(loader)  # the loader really owns a generator to restore
    net = mixed()  # mixed train / eval tree, a frozen layer, BatchNorm, dropout
    net.head.weight.grad = torch.full_like(net.head.weight, 0.5)  # a caller's own grad
    params = list(net.parameters())
    random.seed(5)
    np.random.seed(5)
    torch.manual_seed(5)
    before, outside = snapshot(net), world(loader)
    seen: list[torch.Tensor] = []

    def loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        seen.append(net.head.weight.detach().clone())
        return F.cross_entropy(out, y)

    result = lr_finder(net, loader, loss_fn=loss, start_lr=1e-3, end_lr=1.0, num_iter=20)
    assert isinstance(result, LRFinderResult) and len(result.lrs) == 20  # 8 per pass: cycled
    assert not torch.equal(seen[0], seen[-1])  # the sweep did train the net
    assert_same(net, before)  # values, modes, flags, grads, hooks
    assert all(a is b for a, b in zip(net.parameters(), params, strict=True))
    assert_same_world(loader, outside)


def test_restores_everything_when_the_sweep_raises_mid_way():
    loader = loaders()[0]
    net = mixed()
    torch.manual_seed(5)
    before, outside = snapshot(net), world(loader)
    calls = []

    def loss(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        calls.append(1)
        if len(calls) == 6:  # five steps taken: weights, BatchNorm, RNG all moved
            raise RuntimeError("boom in the loss")
        return F.cross_entropy(out, y)

    with pytest.raises(RuntimeError, match="boom in the loss"):
        lr_finder(net, loader, loss_fn=loss, start_lr=1e-2, end_lr=1.0, num_iter=20)
    assert_same(net, before)
    assert_same_world(loader, outside)
    net.boom.armed = True  # and when the forward itself raises
    with pytest.raises(RuntimeError, match="boom inside the forward"):
        lr_finder(net, loader, loss_fn=F.cross_entropy, num_iter=5)
    net.boom.armed = False
    assert_same(net, before)
    assert_same_world(loader, outside)


def test_the_suggested_lr_lies_where_the_smoothed_loss_falls():
    net = linear()
    result = lr_finder(net, regression(), loss_fn=F.mse_loss, start_lr=1e-4, end_lr=10.0,
                       num_iter=60)
    smoothed = result.smoothed_losses
    at = result.lrs.index(result.suggested_lr)
    lowest = int(np.argmin(smoothed))
    assert 0 < at < lowest
    assert smoothed[at] < smoothed[at - 1] and smoothed[at + 1] < smoothed[at]
    assert result.lrs[0] < result.suggested_lr < result.lrs[lowest]
    # The figure: raw and smoothed series on a log axis, the suggestion marked.
    traces = result.figure.data
    assert [t.name for t in traces][:2] == ["loss", "smoothed loss"]
    assert tuple(traces[1].y) == smoothed and traces[2].x == (result.suggested_lr,)
    assert result.figure.layout.xaxis.type == "log"
    assert json.loads(pio.to_json(result.figure, validate=True))["data"]  # Plotly validates


def test_divergence_stops_the_sweep_early():
    net = linear()
    result = lr_finder(net, regression(), loss_fn=F.mse_loss, start_lr=1e-4, end_lr=100.0,
                       num_iter=100)
    assert result.diverged and len(result.lrs) < 100
    smoothed = result.smoothed_losses
    lowest = min(smoothed[:-1])
    assert smoothed[-1] - lowest > 3.0 * abs(lowest)  # diverge_threshold 4: the last crossed
    assert all(s - min(smoothed[: i + 1]) <= 3.0 * abs(min(smoothed[: i + 1]))
               for i, s in enumerate(smoothed[:-1]))  # and nothing before it did
    patient = lr_finder(net, regression(), loss_fn=F.mse_loss, start_lr=1e-4, end_lr=100.0,
                        num_iter=100, diverge_threshold=1e6)
    assert len(patient.lrs) > len(result.lrs)  # a looser bound runs further


def test_the_smoother_and_the_rule_of_section_13_1():
    smoother = Smoother(0.0, 4.0)  # beta 0: the smoothed loss is the loss
    assert [smoother.add(v) for v in (2.0, 1.0, 4.0)] == [2.0, 1.0, 4.0]
    assert not smoother.diverged(4.0) and smoother.diverged(4.0001)  # above 4 x lowest
    negative = Smoother(0.0, 2.0)
    negative.add(-2.0)  # a negative loss: the bound is lowest + (t - 1) * |lowest|
    assert not negative.diverged(0.0) and negative.diverged(0.01)
    # Bias-corrected: a constant loss smooths to itself from the first value on.
    assert Smoother(0.98, 4.0).add(3.0) == pytest.approx(3.0)
    # Never past the lowest point, never in the first tenth.
    lrs = [10.0 ** (i - 20) for i in range(20)]
    values = [5.0, 1.0] + [4.0 - 0.2 * i for i in range(18)]  # a noisy drop, then descent
    assert steepest_descent(lrs, values) in lrs[2:]
    assert steepest_descent([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) in (1.0, 2.0, 3.0)
    assert steepest_descent([1.0, 2.0], [1.0, 2.0]) == 1.0  # never fell: the lowest point


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"diverge_threshold": 1.0}, "diverge_threshold must be > 1"),
    ({"diverge_threshold": 0.5}, "diverge_threshold"),
    ({"start_lr": 0.0}, "start_lr"),
    ({"start_lr": 1.0, "end_lr": 0.5}, "end_lr"),
    ({"num_iter": 1}, "num_iter"),
    ({"smoothing": 1.0}, "smoothing"),
])
def test_bad_arguments_are_refused_before_anything_is_touched(kwargs, match):
    loader = loaders()[0]
    net = mixed()
    before, outside = snapshot(net), world(loader)
    with pytest.raises(ValueError, match=match):
        lr_finder(net, loader, loss_fn=F.cross_entropy, **kwargs)
    assert_same(net, before)
    assert_same_world(loader, outside)


def test_a_first_loss_that_is_not_finite_is_a_named_error():
    loader = loaders()[0]
    net = mixed()
    before = snapshot(net)
    with pytest.raises(LRSweepError, match="start_lr"):
        lr_finder(net, loader, loss_fn=lambda out, y: out.sum() * float("nan"))
    with pytest.raises(LRSweepError, match="no batch"):
        lr_finder(net, [], loss_fn=F.cross_entropy)
    assert_same(net, before)


def test_without_plotly_the_import_error_comes_before_anything_is_touched(monkeypatch):
    hide(monkeypatch, "plotly")
    message = ("nnx.lr_finder needs the 'plotly' package; install it with "
               "pip install plotly")
    with pytest.raises(ImportError) as raised:
        lr_finder(object(), object(), loss_fn=None)  # nothing valid: any work would raise
    assert str(raised.value) == message
    loader = loaders()[0]
    net = mixed()
    before, outside = snapshot(net), world(loader)
    with pytest.raises(ImportError, match="install it with"):
        lr_finder(net, loader, loss_fn=F.cross_entropy, diverge_threshold=0.5)
    assert_same(net, before)
    assert_same_world(loader, outside)


@pytest.mark.parametrize("first", ["import nnx.lr_finder", "from nnx import lr_finder"])
def test_nnx_lr_finder_is_one_callable_object_whichever_import_comes_first(first):
    # nnx.lr_finder is the package (spec §12) and the call (§13.1): Python binds the
    # name to the package when it is imported, so the package itself is the call.
    assert nnx.lr_finder is lr_finder and callable(lr_finder)
    assert inspect.signature(lr_finder) == inspect.signature(lr_range_test)
    code = (f"{first}\n"
            "import nnx, torch, torch.nn.functional as F\n"
            "import nnx.lr_finder\n"
            "from nnx import lr_finder\n"
            "assert lr_finder is nnx.lr_finder is nnx.lr_finder.lr_finder\n"
            "net = torch.nn.Linear(2, 1)\n"
            "data = [(torch.randn(4, 2), torch.randn(4, 1))]\n"
            "r = lr_finder(net, data, loss_fn=F.mse_loss, num_iter=3)\n"
            "assert len(r.lrs) == 3, r\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_an_nnmodel_is_swept_through_its_net_and_its_own_batch_adapter():
    model = feed_forward()  # NNModel: the sweep works on model.net
    g = torch.Generator().manual_seed(4)
    data = TensorDataset(torch.randn(32, 8, generator=g), torch.randint(0, 3, (32,), generator=g))
    loader = DataLoader(data, batch_size=8)
    before = snapshot(model.net)
    result = lr_finder(model, loader, loss_fn=F.cross_entropy, num_iter=6)
    assert len(result.lrs) == 6 and result.lrs[0] == pytest.approx(1e-7)
    assert_same(model.net, before)


def test_the_sweep_runs_in_core_loop_through_its_public_seam_and_leaves_no_run(
        monkeypatch, tmp_path):
    # The loop's seam (run_fit_loop with an UpdateOwner), never a subclass of the loop:
    # the owner reaches the loop, which runs every step, and no run stays anywhere.
    import nnx.lr_finder.sweep as sweep
    from nnx.extend import UpdateOwner, run_fit_loop

    seen: dict[str, Any] = {}

    def watched(owner, model, params, **kwargs):
        seen.update(owner=owner, root=kwargs["root"])
        return run_fit_loop(owner, model, params, **kwargs)

    monkeypatch.setattr(sweep, "run_fit_loop", watched)
    monkeypatch.chdir(tmp_path)
    result = lr_finder(linear(), regression(batch_size=32), loss_fn=F.mse_loss,
                       num_iter=12, end_lr=1e-2)
    assert isinstance(seen["owner"], UpdateOwner)
    assert len(result.lrs) == 12 and list(result.lrs) == seen["owner"].swept
    assert not Path(seen["root"]).exists()  # the scratch root is gone
    assert list(tmp_path.iterdir()) == []  # nothing under the caller's directory
