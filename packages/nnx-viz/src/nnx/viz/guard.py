"""The non-destructive contract (spec §13.2) for the helpers that run the model.

``activation_map``, ``attribute``, ``netron_export`` and ``summary`` run the caller's
net. Around that run :func:`untouched` puts back what the run could change: every
submodule's own train / eval flag (core's ``preserved_state``, never flattened to the
root's), every parameter's ``requires_grad`` flag and ``.grad`` (an attribution computes
gradients; a caller between ``backward()`` and ``step()`` keeps its own), and the module
hooks the run registered (torchinfo's and Captum's remove theirs, but an exception inside
their bodies must not leave one behind). All of it in ``finally``: it holds when the
body raises.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from torch import nn

from nnx.extend import preserved_state

__all__ = ["HOOK_TABLES", "untouched"]

#: The per-module hook tables of ``torch.nn.Module``: a hook registered during the call
#: is a new key in one of them (what its RemovableHandle would delete).
HOOK_TABLES = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks",
               "_backward_pre_hooks", "_state_dict_hooks", "_load_state_dict_pre_hooks")


def _hooks(net: nn.Module) -> list[tuple[dict[int, object], set[int]]]:
    return [(table, set(table)) for module in net.modules()
            for table in (getattr(module, name, None) for name in HOOK_TABLES)
            if isinstance(table, dict)]


@contextmanager
def untouched(net: nn.Module, *, mode: Literal["eval", "train"] = "eval") -> Iterator[nn.Module]:
    """Run the body with ``net`` in ``mode``, then restore modes, flags, grads, hooks."""
    params = list(net.parameters())
    flags = [(p, p.requires_grad, p.grad) for p in params]
    hooks = _hooks(net)
    try:
        with preserved_state(net, mode=mode):
            yield net
    finally:
        for param, requires_grad, grad in flags:
            param.requires_grad_(requires_grad)
            param.grad = grad
        for table, before in hooks:
            for key in [k for k in table if k not in before]:
                del table[key]
