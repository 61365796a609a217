"""Train/eval mode preservation (spec §13.2, the non-destructive contract).

Inference and inspection helpers switch a network to ``eval()`` (the LR
finder to ``train()``) for the length of a call, then put back every
submodule's own flag. Restoring only the root's flag would flatten a
mixed-mode tree, for example a frozen backbone deliberately kept in eval
mode under a training head, so each submodule is recorded and restored.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

from torch import nn

from nnx._foundation.validation import check_choice

__all__ = ["preserved_state"]


@contextmanager
def preserved_state(
    module: nn.Module, *, mode: Literal["eval", "train"] | None
) -> Iterator[nn.Module]:
    """Run the body with ``module`` in ``mode``, then restore every submodule's flag.

    ``mode=None`` switches nothing but still restores, so a body that changes
    modes itself is undone too. Restoration runs in ``finally``: it holds when
    the body raises. Flags are written back directly rather than through
    ``train()``, which recurses and may be overridden; submodules added by
    the body are left as they are. Yields ``module``.
    """
    if mode is not None:
        check_choice("preserved_state mode", mode, ("eval", "train"))
    if not isinstance(module, nn.Module):
        raise ValueError(f"preserved_state expects an nn.Module; got {type(module).__name__}")
    saved = [(sub, sub.training) for sub in module.modules()]
    try:
        if mode is not None:
            module.train(mode == "train")
        yield module
    finally:
        for sub, training in saved:
            sub.training = training
