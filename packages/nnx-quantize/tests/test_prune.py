"""nnx.prune (spec §16): magnitude_prune keeps the state_dict keys with bake=True and loads
into stock code under strict=True; the sparsity is exact and every kept |w| exceeds every
pruned |w|; nets still carrying masks or weight_norm / spectral_norm parametrizations are
refused before anything changes; semi_structured_24 applies the 2:4 pattern on the CPU."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn
from torch.nn.utils import parametrizations, prune

from nnx import Devices, NNModel, NNModelParams, NNParams
from nnx.prune import PruneError, magnitude_prune, semi_structured_24


def _net(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=12, output_dim=3, hidden_dims=(20, 8)),
                   params=NNModelParams(device=Devices.CPU)).net


def _weights(net: nn.Module) -> torch.Tensor:
    return torch.cat([m.weight.detach().reshape(-1) for m in net.modules()
                      if isinstance(m, nn.Linear)])


def test_bake_keeps_keys_and_loads_into_stock_code_under_strict() -> None:
    net = _net()
    keys = list(net.state_dict())
    flags = [p.requires_grad for p in net.parameters()]
    params = list(net.parameters())
    assert magnitude_prune(net, 0.5) is net
    assert list(net.state_dict()) == keys
    assert list(net.parameters()) == params  # the same Parameter objects
    assert [p.requires_grad for p in net.parameters()] == flags
    stock = _net(seed=1)
    stock.load_state_dict(net.state_dict(), strict=True)
    x = torch.randn(4, 12)
    assert torch.equal(stock(x), net(x))


@pytest.mark.parametrize("amount", [0.0, 0.1, 0.37, 0.5, 0.9])
def test_sparsity_is_exact_and_kept_magnitudes_exceed_pruned(amount: float) -> None:
    net = _net()
    before = _weights(net).abs()
    magnitude_prune(net, amount)
    after = _weights(net)
    pruned = after == 0
    assert int(pruned.sum()) == round(amount * after.numel())
    if amount > 0:
        assert before[~pruned].min() > before[pruned].max()
    assert torch.equal(after[~pruned].abs(), before[~pruned])  # kept weights unchanged


def test_ties_prune_the_earlier_position_first() -> None:
    net = nn.Sequential(nn.Linear(4, 1, bias=False), nn.Linear(1, 1, bias=False))
    with torch.no_grad():
        net[0].weight.copy_(torch.tensor([[0.5, -0.2, 0.2, 0.9]]))
        net[1].weight.fill_(0.2)
    magnitude_prune(net, 0.4)  # 2 of 5; three weights tie at |0.2|
    assert (net[0].weight != 0).tolist() == [[True, False, False, True]]
    assert net[1].weight.item() != 0  # the later of the three ties is kept


def test_bake_false_leaves_torch_masks_on_the_net() -> None:
    net = _net()
    magnitude_prune(net, 0.25, bake=False)
    assert "layers.0.weight_mask" in net.state_dict()
    assert int((_weights(net) == 0).sum()) == round(0.25 * _weights(net).numel())


@pytest.mark.parametrize("change, what", [
    (lambda net: prune.l1_unstructured(net.layers[0], "weight", amount=0.5), "pruning mask"),
    (lambda net: parametrizations.weight_norm(net.layers[0]), "weight_norm"),
    (lambda net: parametrizations.spectral_norm(net.layers[0]), "spectral_norm"),
])
@pytest.mark.parametrize("prune_fn", [lambda n: magnitude_prune(n, 0.5), semi_structured_24])
def test_a_net_still_carrying_masks_or_norms_is_refused_unchanged(change, what,
                                                                  prune_fn) -> None:
    net = _net()
    change(net)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    with pytest.raises(PruneError, match=what):
        prune_fn(net)
    after = net.state_dict()
    assert list(after) == list(before)
    assert all(torch.equal(after[k], v) for k, v in before.items())


@pytest.mark.parametrize("bad", [-0.1, 1.0, 1.5, True, "0.5"])
def test_an_amount_outside_the_unit_interval_is_refused(bad) -> None:
    net = _net()
    before = _weights(net).clone()
    with pytest.raises(PruneError, match="amount"):
        magnitude_prune(net, bad)
    assert torch.equal(_weights(net), before)


def test_a_net_without_prunable_weights_is_refused() -> None:
    with pytest.raises(PruneError, match="no Linear / Conv"):
        magnitude_prune(nn.Sequential(nn.ReLU()), 0.5)


def test_semi_structured_keeps_two_of_every_four_on_cpu() -> None:
    net = _net()
    keys = list(net.state_dict())
    before = {n: m.weight.detach().clone() for n, m in net.named_modules()
              if isinstance(m, nn.Linear)}
    semi_structured_24(net)
    assert list(net.state_dict()) == keys
    for name, module in net.named_modules():
        if isinstance(module, nn.Linear):
            groups = module.weight.detach().reshape(-1, 4)
            old = before[name].reshape(-1, 4).abs()
            kept = groups != 0
            assert (kept.sum(dim=1) == 2).all()
            # the two kept are the two largest of their group
            assert (old.masked_fill(~kept, float("inf")).min(dim=1).values
                    >= old.masked_fill(kept, -1.0).max(dim=1).values).all()


def test_semi_structured_refuses_an_input_width_not_a_multiple_of_four() -> None:
    net = nn.Sequential(nn.Linear(8, 6), nn.ReLU(), nn.Linear(6, 2))
    before = net[0].weight.detach().clone()
    with pytest.raises(PruneError, match=r"2 \(in_features=6\)"):
        semi_structured_24(net)
    assert torch.equal(net[0].weight, before)  # refused before the first layer changed


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_the_cuda_kernel_is_refused_off_an_ampere_gpu_before_any_weight_changes(dtype) -> None:
    net = _net().to(dtype)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    with pytest.raises(PruneError, match=r"Ampere or newer GPUs .* is on cpu"):
        semi_structured_24(net, accelerate=True)
    assert all(torch.equal(v, net.state_dict()[k]) for k, v in before.items())
    with pytest.raises(PruneError, match="accelerate must be a bool"):
        semi_structured_24(net, accelerate="yes")  # type: ignore[arg-type]


_AMPERE = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)


@pytest.mark.skipif(not _AMPERE, reason="torchao's 2:4 kernel needs an Ampere+ CUDA GPU")
def test_the_cuda_kernel_computes_what_the_masked_dense_net_computes() -> None:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 128)).half().cuda()
    net.eval()
    dense = semi_structured_24(copy.deepcopy(net))
    sparse = semi_structured_24(net, accelerate=True)
    x = torch.randn(64, 128, dtype=torch.float16, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(sparse(x), dense(x), rtol=1e-2, atol=1e-2)
    assert type(sparse[0].weight).__name__.startswith("SparseSemiStructuredTensor")
