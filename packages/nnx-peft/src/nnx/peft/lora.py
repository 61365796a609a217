"""LoRA (spec §11.1): ``LoRALinear`` and ``apply_lora_to``.

``y = base(x) + (alpha / r) · lora_B(lora_A(dropout(x)))``. ``lora_A`` and
``lora_B`` are ``nn.Linear(bias=False)`` submodules, as in Hugging Face PEFT,
so the adapter's state-dict keys are ``<path>.lora_A.weight`` /
``<path>.lora_B.weight`` and the wrapped layer's become ``<path>.base.weight``
/ ``<path>.base.bias``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from nnx.extend import POSITIVE, UNIT_HALF_OPEN, check_count, check_real
from nnx.peft.targeting import AdapterWrapper, replace_slots, select_linear_slots

__all__ = ["LoRALinear", "apply_lora_to", "check_lora_args"]

_HALF = (torch.float16, torch.bfloat16)


def check_lora_args(what: str, r: object, alpha: object,
                    dropout: object) -> tuple[int, float, float]:
    """``(r, alpha, dropout)`` validated: r an integer >= 1, alpha finite and > 0 (§2.3),
    dropout in [0, 1); ValueError naming the field and its domain otherwise."""
    rank = check_count(f"{what} r", r)
    scale = float(check_real(f"{what} alpha", alpha, POSITIVE))
    drop = float(check_real(f"{what} dropout", dropout, UNIT_HALF_OPEN))
    return rank, scale, drop


class LoRALinear(AdapterWrapper):
    """A frozen ``nn.Linear`` plus a trainable rank-``r`` residual (Hu et al., 2021).

    ``lora_A`` (r × in) is Kaiming-uniform initialized (``a = sqrt(5)``, as in
    HF PEFT) and ``lora_B`` (out × r) zero-initialized, so at step 0 the
    output is exactly ``base(x)``. Both are allocated with the base weight's
    dtype and device (meta included); the base is never moved, recast or
    replaced, only frozen. The wrapper and its ``lora_dropout`` copy the base's
    training flag. ``init_weights=False`` leaves A and B zero without drawing
    from any RNG stream (a recipe replay, whose weights are loaded next).
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0, *,
                 init_weights: bool = True) -> None:
        rank, scale, drop = check_lora_args(type(self).__name__, r, alpha, dropout)
        self.check_base(base)
        super().__init__()
        self.adopt(base)  # first, so the state dict lists base.* before the adapter
        weight = base.weight
        self.r, self.alpha, self.scaling = rank, scale, scale / rank
        self.merged = False
        self._merge_flags: tuple[bool, bool] | None = None
        self.lora_dropout: nn.Module = nn.Dropout(drop) if drop > 0 else nn.Identity()
        # Built on meta, then given storage where the base lives: no default
        # init runs, so the only RNG draw is the explicit one for lora_A below.
        self.lora_A = nn.Linear(base.in_features, rank, bias=False, device="meta",
                                dtype=weight.dtype).to_empty(device=weight.device)
        self.lora_B = nn.Linear(rank, base.out_features, bias=False, device="meta",
                                dtype=weight.dtype).to_empty(device=weight.device)
        with torch.no_grad():
            if init_weights:
                nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
            else:
                self.lora_A.weight.zero_()
            self.lora_B.weight.zero_()
        for child in (self.lora_dropout, self.lora_A, self.lora_B):
            child.training = base.training

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha}, merged={self.merged}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.merged:  # the update already lives in base.weight
            merged: torch.Tensor = self.base(x)
            return merged
        if self._compose(x):
            # Inference on a large input: one matmul with W + (alpha/r)·B·A. Composing
            # costs one pass over the weight, the adapter's own path passes over the
            # (here larger) input and output.
            weight = torch.addmm(self.base.weight, self.lora_B.weight, self.lora_A.weight,
                                 alpha=self.scaling)
            composed: torch.Tensor = F.linear(x, weight, self.base.bias)
            return composed
        out: torch.Tensor = self.base(x)
        # Scale the rank-r activations (r/out of the work of scaling the output) and
        # let one GEMM add B·h into the base output: the naive B(h) * s + out makes
        # three extra passes over the output.
        h = self.lora_A(self.lora_dropout(x)) * self.scaling
        flat = torch.addmm(out.reshape(-1, out.shape[-1]), h.reshape(-1, h.shape[-1]),
                           self.lora_B.weight.t())
        return flat.view(out.shape)

    def _compose(self, x: torch.Tensor) -> bool:
        """Whether to run as one matmul with the composed weight: only where that is
        the same function (no active dropout, autograd needs no adapter gradient, a
        plain Linear without hooks) and where it is cheaper. Per input row the
        adapter's path costs about r·(in + out) + 2·out element operations; composing
        costs out·in·(r + 2) once."""
        base = self.base
        # _forward_hooks / _forward_pre_hooks: torch's nn.Module hook tables (no public read)
        if (self.training and not isinstance(self.lora_dropout, nn.Identity)) or (
                type(base) is not nn.Linear or base._forward_hooks or base._forward_pre_hooks):
            return False
        if torch.is_grad_enabled() and (self.lora_A.weight.requires_grad
                                        or self.lora_B.weight.requires_grad
                                        or base.weight.requires_grad):
            return False
        n_in, n_out, rank = base.in_features, base.out_features, self.r
        rows = x.numel() // max(n_in, 1)
        return rows * (rank * (n_in + n_out) + 2 * n_out) > n_out * n_in * (rank + 2)

    # -- merging (nnx.peft.merging drives these; DoRA overrides them) ----------------
    def delta_weight(self) -> torch.Tensor:
        """``(alpha / r) · B · A`` in the base weight's dtype, computed in FP32 for
        FP16 / BF16 layers (as HF PEFT does) and cast back."""
        a, b = self.lora_A.weight.detach(), self.lora_B.weight.detach()
        dtype = a.dtype
        if dtype in _HALF:
            a, b = a.float(), b.float()
        delta: torch.Tensor = ((b @ a) * self.scaling).to(dtype)
        return delta

    def merge(self) -> bool:
        """Fold the update into ``base.weight``; False (nothing done) if already merged.

        While merged the adapters are frozen too, so training the merged
        wrapper cannot count the update twice: forward is ``base(x)`` alone
        and nothing of the adapter is trainable until :meth:`unmerge`.
        """
        if self.merged:
            return False
        with torch.no_grad():
            self.base.weight.add_(self.delta_weight())
        self._merge_flags = (self.lora_A.weight.requires_grad,
                             self.lora_B.weight.requires_grad)
        self.lora_A.weight.requires_grad_(False)
        self.lora_B.weight.requires_grad_(False)
        self.merged = True
        return True

    def unmerge(self) -> bool:
        """Subtract the update back out of ``base.weight``; False if not merged."""
        if not self.merged:
            return False
        with torch.no_grad():
            self.base.weight.sub_(self.delta_weight())
        a_flag, b_flag = self._merge_flags or (True, True)
        self.lora_A.weight.requires_grad_(a_flag)
        self.lora_B.weight.requires_grad_(b_flag)
        self._merge_flags = None
        self.merged = False
        return True


def apply_lora_to(module: nn.Module, *patterns: str, r: int, alpha: float,
                  dropout: float = 0.0) -> int:
    """Wrap every ``nn.Linear`` a glob selects in a :class:`LoRALinear`; the new count.

    Patterns are ``fnmatch`` globs over every registration path (see
    :func:`nnx.peft.targeting.select_linear_slots` for the matching rules and
    refusals). Everything is validated before the first wrapper is built, so
    a refused call changes nothing; already-wrapped layers are left alone
    (a second identical call returns 0). Never calls ``.train()`` / ``.eval()``.
    """
    rank, scale, drop = check_lora_args("apply_lora_to", r, alpha, dropout)
    slots = select_linear_slots(module, patterns, what="apply_lora_to")
    return replace_slots(slots, lambda linear: LoRALinear(linear, rank, scale, drop))
