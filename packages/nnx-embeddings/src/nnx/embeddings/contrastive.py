"""NT-Xent, reached in nnx-paradigms (spec §10.2): one loss, never a second copy.

nnx-paradigms is a dependency of this distribution, reached through core's
``require_distribution`` (add-on sources import only ``nnx`` and ``nnx.extend``): a
broken install names ``pip install nnx-paradigms`` instead of failing mid-step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nnx.extend import require_distribution

__all__ = ["nt_xent"]


def nt_xent(who: str) -> Callable[..., Any]:
    """``nnx.paradigms.nt_xent_loss`` (``(z1, z2, *, temperature)``)."""
    paradigms = require_distribution("nnx-paradigms", "nnx.paradigms", needed_by=who)
    loss: Callable[..., Any] = paradigms.nt_xent_loss
    return loss
