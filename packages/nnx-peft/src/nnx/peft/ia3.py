"""IA3Linear: (IA)^3's learned scaling vector on a frozen nn.Linear (Liu et al., 2022).

Matches HF PEFT's ``IA3Config`` layer: a non-feed-forward target scales the
Linear's OUTPUT (one factor per out feature, the bias scaled too); a
feed-forward target scales its INPUT (one factor per in feature), as in the
paper, where (IA)^3 rescales the inner activation of the position-wise FFN.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from fnmatch import fnmatchcase
from pathlib import Path

import torch
from torch import nn

from nnx.peft.adapter_files import Source, load_owned, owned_tensors, save_owned
from nnx.peft.targeting import AdapterWrapper, adapter_slots, replace_slots, select_linear_slots

__all__ = ["IA3Linear", "apply_ia3_to", "ia3_state_dict", "load_ia3_weights",
           "save_ia3_weights"]


class IA3Linear(AdapterWrapper):
    """Wrap ``base`` (an ``nn.Linear``) with a learned ``scaling`` vector, initialized to ones.

    ``feedforward=False``: ``y = base(x) * scaling`` (``scaling`` has ``out_features``
    entries). ``feedforward=True``: ``y = base(x * scaling)`` (``in_features``
    entries). The base's parameters are frozen; ``scaling`` is allocated from the
    base weight's dtype and device (meta included), and the wrapper copies the
    base's train/eval flag (spec §11).
    """

    def __init__(self, base: nn.Linear, feedforward: bool = False) -> None:
        self.check_base(base)
        if not isinstance(feedforward, bool):
            raise TypeError(
                f"IA3Linear.feedforward must be a bool; got {feedforward!r} "
                f"({type(feedforward).__name__})"
            )
        super().__init__()
        self.adopt(base)  # first, so the state dict lists base.* before the scaling
        self.feedforward = feedforward
        size = base.in_features if feedforward else base.out_features
        w = base.weight
        self.scaling = nn.Parameter(torch.ones(size, dtype=w.dtype, device=w.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.feedforward:
            out: torch.Tensor = self.base(x * self.scaling)
            return out
        scaled: torch.Tensor = self.base(x) * self.scaling
        return scaled

    def extra_repr(self) -> str:
        return f"feedforward={self.feedforward}"


def feedforward_patterns(feedforward: object, *, what: str = "apply_ia3_to"
                         ) -> tuple[str, ...]:
    """``feedforward`` as a tuple of non-empty globs; one glob is accepted as given (HF's
    ``feedforward_modules`` takes a str or a list)."""
    patterns = (feedforward,) if isinstance(feedforward, str) else feedforward
    if not isinstance(patterns, Sequence):
        raise ValueError(f"{what}: feedforward must be a sequence of glob strings; got "
                         f"{feedforward!r}")
    for i, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{what}: feedforward[{i}] must be a non-empty glob string; "
                             f"got {pattern!r}")
    return tuple(patterns)


def apply_ia3_to(module: nn.Module, *patterns: str,
                 feedforward: Sequence[str] | str = ()) -> int:
    """Wrap every ``nn.Linear`` a glob selects in an :class:`IA3Linear`; the new count.

    ``feedforward`` globs mark which of the selected layers are feed-forward
    (their scaling multiplies the input, as HF PEFT's ``feedforward_modules``);
    each must match a selected layer, like HF's rule that feed-forward modules
    are a subset of the targets. Matching, refusals and idempotence are LoRA's
    (spec §11 "Shared modules"): everything is validated before the first
    wrapper is built, so a refused call changes nothing, and a path already
    holding an adapter wrapper is left as it is (its kind of scaling included).
    """
    ff = feedforward_patterns(feedforward)
    slots = select_linear_slots(module, patterns, what="apply_ia3_to")
    targeted = [s.paths for s in slots]
    # Already-wrapped targets count too, so a repeated call stays a no-op.
    targeted += [s.paths for s in adapter_slots(module, AdapterWrapper)
                 if any(fnmatchcase(p, g) for p in s.paths for g in patterns)]
    stray = [g for g in ff if not any(fnmatchcase(p, g) for paths in targeted for p in paths)]
    if stray:
        raise ValueError(f"apply_ia3_to: feedforward pattern(s) {', '.join(map(repr, stray))} "
                         f"match none of the layers the target patterns select; feed-forward "
                         f"layers must be among the targets")
    is_ff = {id(s.module): any(fnmatchcase(p, g) for p in s.paths for g in ff) for s in slots}
    return replace_slots(slots, lambda linear: IA3Linear(linear, feedforward=is_ff[id(linear)]))


# -- adapter files: the scaling of each IA3Linear, chosen by ownership ------------------

def _owned(module: nn.Module, what: str) -> dict[str, torch.Tensor]:
    """State-dict name → tensor for every IA3 scaling the module owns (every alias name).

    By ownership, never by name: a layer called ``scaling_projection`` is not selected.
    """
    return owned_tensors(module, IA3Linear, lambda w: (w.scaling,),
                         what=what, hint="wrap it with apply_ia3_to first")


def ia3_state_dict(module: nn.Module) -> dict[str, torch.Tensor]:
    """The detached scaling of every IA3Linear in ``module``, by state-dict name."""
    return {k: v.detach() for k, v in _owned(module, "ia3_state_dict").items()}


def save_ia3_weights(module: nn.Module, path: str | os.PathLike[str]) -> Path:
    """Write :func:`ia3_state_dict` to ``path`` (``torch.save`` format), atomically.

    ValueError before any file is touched if ``module`` holds no IA3Linear.
    """
    return save_owned(_owned(module, "save_ia3_weights"), path)


def load_ia3_weights(module: nn.Module, source: Source) -> int:
    """Load the IA3 scalings of ``source`` into the already-wrapped ``module``; the count of
    accepted tensors.

    Only names the destination's IA3Linear layers own are read (a full
    checkpoint's frozen ``base`` tensors are ignored). Values are copied into
    the existing tensors, keeping the destination's dtype and device; no mode
    changes. A wrong-shaped owned tensor raises torch's size-mismatch error
    before any tensor is copied; ValueError if no tensor of ``source`` is accepted.
    """
    return load_owned("load_ia3_weights", module, _owned(module, "load_ia3_weights"), source,
                      complete=False, describe="an IA3 scaling")
