"""The 2:4 semi-structured pattern (spec §16): two of every four consecutive input weights.

For each Linear weight, every group of four consecutive entries along the input dimension
keeps its two largest ``|w|`` (the earlier of two equal magnitudes kept first) and zeroes
the other two, in place, so keys, dtypes and ``requires_grad`` flags stay. By default that
is the pattern only, on any device, without a sparse kernel: a dense net with 50 % zeros,
no faster than before, loadable by stock code.

``accelerate=True`` then swaps each weight for torchao's semi-structured sparse tensor
(``sparsify_(net, semi_sparse_weight())``), whose CUDA 2:4 kernels run only on Ampere
and newer GPUs in half precision: it is refused (PruneError, before any weight changes)
for a weight that is not on such a GPU in float16 / bfloat16. The accelerated net is for
inference (its weights no longer train).
"""

from __future__ import annotations

import torch
from torch import nn

from nnx.prune.errors import PruneError
from nnx.prune.targets import prunable_layers

__all__ = ["semi_structured_24"]


def semi_structured_24(net: nn.Module, *, accelerate: bool = False) -> nn.Module:
    """Apply the 2:4 pattern to every ``nn.Linear`` weight of ``net`` in place; returns
    ``net``. ``accelerate=True``: then hand the weights to torchao's CUDA 2:4 kernel (see
    the module docstring). Refuses (:class:`PruneError`) before any change a net without a
    Linear, a Linear whose input width is not a multiple of 4, a net still carrying masks
    or weight_norm / spectral_norm parametrizations, and with ``accelerate=True`` a weight
    off an Ampere+ GPU or not in half precision."""
    layers = [(name, m) for name, m in prunable_layers(net, what="semi_structured_24")
              if isinstance(m, nn.Linear)]
    if not layers:
        raise PruneError(f"semi_structured_24: {type(net).__name__} has no nn.Linear")
    odd = [f"{name} (in_features={m.in_features})" for name, m in layers
           if m.in_features % 4]
    if odd:
        raise PruneError(f"semi_structured_24: the 2:4 pattern needs input widths that are "
                         f"multiples of 4: {', '.join(odd)}")
    if not isinstance(accelerate, bool):
        raise PruneError(f"semi_structured_24: accelerate must be a bool; got {accelerate!r}")
    if accelerate:
        _check_kernel_fits(layers)
    for _, layer in layers:
        w = layer.weight
        groups = w.detach().abs().reshape(-1, 4)
        # stable descending sort: the two largest of each group, the earlier first on ties
        top = torch.argsort(groups, dim=1, descending=True, stable=True)[:, :2]
        mask = torch.zeros_like(groups, dtype=torch.bool).scatter_(1, top, True)
        with torch.no_grad():
            w.mul_(mask.reshape(w.shape).to(w.dtype))
    if accelerate:
        # torchao is imported on use: importing nnx.prune stays cheap.
        from torchao.sparsity import semi_sparse_weight, sparsify_

        wanted = {id(layer) for _, layer in layers}
        sparsify_(net, semi_sparse_weight(), filter_fn=lambda m, _fqn: id(m) in wanted)
    return net


def _check_kernel_fits(layers: list[tuple[str, nn.Linear]]) -> None:
    """PruneError naming every Linear whose weight torchao's 2:4 kernel cannot take: not
    on a CUDA GPU of compute capability 8.0 (Ampere) or newer, or not float16 / bfloat16."""
    problems = []
    for name, layer in layers:
        w = layer.weight
        if w.device.type != "cuda":
            problems.append(f"{name} is on {w.device.type}")
        elif torch.cuda.get_device_capability(w.device) < (8, 0):
            major, minor = torch.cuda.get_device_capability(w.device)
            problems.append(f"{name} is on a GPU of compute capability {major}.{minor}")
        elif w.dtype not in (torch.float16, torch.bfloat16):
            problems.append(f"{name} is {w.dtype}")
    if problems:
        raise PruneError("semi_structured_24(accelerate=True): the CUDA 2:4 kernel runs on "
                         "Ampere or newer GPUs (compute capability >= 8.0) in float16 / "
                         "bfloat16; " + "; ".join(problems) + ". Without accelerate the "
                         "pattern is applied as a mask on any device")
