"""Where a surgery cuts: the named module, its container, and what follows it (spec §16).

Every check here runs on the caller's net without changing it; the surgeries copy the
net only after all of them passed, so a refusal leaves nothing half done.
"""

from __future__ import annotations

import copy
from collections import Counter, OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import torch
from torch import nn

from nnx import FeedFwdNN
from nnx.surgery.errors import SurgeryBoundaryError, SurgeryTargetError

__all__ = [
    "ELEMENTWISE",
    "LinearSite",
    "check_unaliased",
    "children",
    "consumer",
    "find_module",
    "following",
    "linear_site",
    "new_linear",
    "swap",
    "with_children",
]

#: Modules that act on each unit alone, so duplicating a unit duplicates its output
#: (exact types: a subclass may do anything in its forward).
ELEMENTWISE: frozenset[type[nn.Module]] = frozenset({
    nn.ReLU, nn.ReLU6, nn.LeakyReLU, nn.ELU, nn.CELU, nn.SELU, nn.GELU, nn.SiLU, nn.Mish,
    nn.Tanh, nn.Sigmoid, nn.Softplus, nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid,
    nn.Identity, nn.Dropout,
})


@dataclass(frozen=True)
class LinearSite:
    """A Linear inside an ``nn.Sequential`` or a FeedFwdNN's ``layers``."""

    name: str  # dotted path of the Linear
    parent_name: str  # dotted path of its container ("" when the container is the net)
    index: int  # its position in the container
    linear: nn.Linear
    feedfwd: bool  # the container is a FeedFwdNN's layers (params must follow)



def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


def find_module(net: nn.Module, name: str, op: str) -> nn.Module:
    """The module ``net`` holds at ``name``, never aliased; SurgeryTargetError otherwise."""
    if not isinstance(name, str) or not name:
        raise SurgeryTargetError(f"{op}: name a submodule by its dotted path; got {name!r}")
    try:
        module = net.get_submodule(name)
    except AttributeError:
        raise SurgeryTargetError(f"{op}: the net has no module {name!r}") from None
    check_unaliased(net, module, name, op)
    return module


def check_unaliased(net: nn.Module, module: nn.Module, name: str, op: str, *,
                    tensors_too: bool = True) -> None:
    """Refuse a module reachable under several names, or (``tensors_too``) one whose
    tensors another module shares (tied weights): replacing it in one place would untie
    the rest."""
    uses = Counter(id(m) for _, m in net.named_modules(remove_duplicate=False))
    if uses[id(module)] > 1:
        raise SurgeryTargetError(f"{op}: {name!r} is shared under several names; "
                                 f"replacing it would untie the others")
    if not tensors_too:
        return
    tensors = Counter(id(p) for _, p in net.named_parameters(remove_duplicate=False))
    if any(tensors[id(p)] > 1 for p in module.parameters(recurse=True)):
        raise SurgeryTargetError(f"{op}: {name!r} shares a weight with another module "
                                 f"(tied weights); replacing it would untie them")


def children(parent: nn.Module) -> list[tuple[str, nn.Module]]:
    """``(key, module)`` of each direct child, in order, a module held twice listed
    twice (``named_children`` lists it once, which would lose a position)."""
    return [(name, module) for name, module in parent.named_modules(remove_duplicate=False)
            if name and "." not in name]


def _container(net: nn.Module, name: str) -> tuple[str, nn.Module, str]:
    parent_name, _, key = name.rpartition(".")
    return parent_name, (net.get_submodule(parent_name) if parent_name else net), key


def linear_site(net: nn.Module, name: str, op: str) -> LinearSite:
    """The exact ``nn.Linear`` at ``name``, inside an ``nn.Sequential`` or the
    ``layers`` of a FeedFwdNN (exactly that class: a subclass's forward may wire its
    layers otherwise); SurgeryTargetError for anything else."""
    linear = find_module(net, name, op)
    if type(linear) is not nn.Linear:
        raise SurgeryTargetError(f"{op}: {name!r} is a {type(linear).__name__}, not an "
                                 f"nn.Linear")
    parent_name, parent, key = _container(net, name)
    if type(net) is FeedFwdNN and parent is net.layers:
        return LinearSite(name, parent_name, int(key), linear, True)
    if type(parent) is nn.Sequential:
        check_unaliased(net, parent, parent_name or "<the net>", op, tensors_too=False)
        keys = [k for k, _ in children(parent)]
        return LinearSite(name, parent_name, keys.index(key), linear, False)
    where = type(parent).__name__
    raise SurgeryTargetError(f"{op}: {name!r} sits in a {where}; surgery infers what "
                             f"follows a layer only inside nn.Sequential or FeedFwdNN.layers")


def following(net: nn.Module, site: LinearSite) -> Iterator[tuple[str, nn.Module]]:
    """``(name, module)`` of what the net applies after the site's Linear, in order,
    within its container (a FeedFwdNN: up to the next layer's Linear)."""
    if site.feedfwd:
        assert isinstance(net, FeedFwdNN)
        i = site.index
        if i + 1 < len(net.layers):
            yield f"activations.{i}", net.activations[i]
            yield f"dropouts.{i}", net.dropouts[i]
            yield f"layers.{i + 1}", net.layers[i + 1]
        return
    parent = net.get_submodule(site.parent_name) if site.parent_name else net
    for key, module in children(parent)[site.index + 1:]:
        yield _join(site.parent_name, key), module


def consumer(net: nn.Module, site: LinearSite, op: str) -> str:
    """The name of the Linear that reads the site's outputs, reached through
    elementwise modules only; SurgeryBoundaryError at anything else."""
    for name, module in following(net, site):
        if type(module) is nn.Linear:
            check_unaliased(net, module, name, op)
            return name
        if type(module) not in ELEMENTWISE:
            raise SurgeryBoundaryError(
                f"{op}: between {site.name!r} and its consumer sits {name!r} "
                f"({type(module).__name__}), which is not elementwise; widening across "
                f"it would change the function")
    raise SurgeryTargetError(f"{op}: no Linear reads {site.name!r}'s outputs in its "
                             f"container (the net's output layer cannot be widened)")


def new_linear(like: nn.Linear, weight: torch.Tensor, bias: torch.Tensor | None, *,
               requires_grad: bool | None = None) -> nn.Linear:
    """A Linear holding ``weight`` / ``bias``, on ``like``'s device and dtype, in its
    train/eval mode, with its tensors' requires_grad (or ``requires_grad`` for a new one)."""
    out = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device="meta",
                    dtype=like.weight.dtype).to_empty(device=like.weight.device)
    # to_empty: no default initialization runs, so no RNG stream moves.
    with torch.no_grad():
        out.weight.copy_(weight)
        if out.bias is not None and bias is not None:
            out.bias.copy_(bias)
    grad = like.weight.requires_grad if requires_grad is None else requires_grad
    out.weight.requires_grad_(grad)
    if out.bias is not None:
        # A replaced bias keeps its own flag (a frozen weight may have a trainable bias);
        # a new layer's bias follows ``requires_grad``.
        source = like.bias if requires_grad is None else None
        out.bias.requires_grad_(grad if source is None else source.requires_grad)
    return out.train(like.training)


def swap(root: nn.Module, name: str, module: nn.Module) -> nn.Module:
    """Put ``module`` at ``name`` in ``root``; the new root (``module`` itself at "")."""
    if not name:
        return module
    _, parent, key = _container(root, name)
    setattr(parent, key, module)  # a Sequential's or ModuleList's child keeps its key
    return root


def with_children(net: nn.Module, parent_name: str,
                  entries: list[tuple[str, nn.Module]]) -> nn.Module:
    """A copy of ``net`` whose ``nn.Sequential`` at ``parent_name`` holds ``entries``
    (copied) instead, in its train/eval mode: positional keys renumber, named keys
    stay. The old container itself is never copied."""
    parent = net.get_submodule(parent_name) if parent_name else net
    # One memo for the whole copy: a tensor or module the container's children share
    # with each other or with the rest of the net stays shared; the old container
    # maps to itself, so it is never copied (it is swapped out below).
    memo: dict[int, object] = {id(parent): parent}
    out = copy.deepcopy(net, memo) if parent_name else None
    modules = [(key, copy.deepcopy(m, memo)) for key, m in entries]
    if all(key.isdigit() for key, _ in children(parent)):
        new = nn.Sequential(*(m for _, m in modules))
    else:
        new = nn.Sequential(OrderedDict(modules))
    new.training = parent.training  # train() would recurse and reset the children's modes
    return new if out is None else swap(out, parent_name, new)
