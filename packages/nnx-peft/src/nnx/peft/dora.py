"""DoRA (Liu et al., 2024): LoRA with a learned per-output-row magnitude.

The layer's effective weight is ``W' = magnitude ⊙ V / ||V||_row`` with
``V = W + (alpha / r) · B · A``; ``magnitude`` (one entry per output row) is
initialized to the row norms of ``V``, which equal ``W``'s at init, so the
layer starts as its base.

Decisions (docs/peft.md, "DoRA"):

* Gradient of the norm. ``||V||_row`` is treated as a constant in backward
  (DoRA paper §4.3, as HF PEFT does): gradients reach ``lora_A`` / ``lora_B``
  through the numerator ``V`` and ``magnitude`` through the scale, never
  through the norm. Forward values are unchanged by this.
* Precision (spec §11 "DoRA precision"). ``V`` and its row norms are computed
  in FP32 for FP16 / BF16 layers (FP64 keeps FP64); the row scale is cast back
  to the layer dtype. The norm is clamped below at ``NORM_EPS``, so a zero (or
  tiny) row of ``V`` gives a finite row equal to the base's at init, not NaN.
* Two forward paths, equal to rounding. When autograd must see the adapter
  (grad enabled and W, A, B or magnitude trainable):
  ``y = s ⊙ (W x + (alpha/r)·B(A x)) + b`` with the row scale
  ``s = magnitude / ||V||``. Otherwise (inference, ``no_grad``) one matmul
  ``F.linear(x, W', b)``: V is built every forward for its norms anyway, so W'
  costs one pass over the weight rather than the adapter's passes over the output.
* Dropout, as HF PEFT: the composed update ``W' - W`` sees ``dropout(x)`` while
  the frozen path sees ``x``: ``y = W x + b + (W' - W)·dropout(x)``. With no
  dropout active (p = 0 or eval) this is the plain ``W' x + b`` above.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from nnx.peft.lora import LoRALinear, check_lora_args
from nnx.peft.targeting import replace_slots, select_linear_slots

__all__ = ["NORM_EPS", "DoRALinear", "apply_dora_to"]

#: Lower clamp of a row norm (as ``F.normalize``'s eps): a zero row of V then has
#: scale ``magnitude / NORM_EPS``, finite, times a zero row: a finite zero output.
NORM_EPS = 1e-12

_HALF = (torch.float16, torch.bfloat16)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in _HALF else dtype


class DoRALinear(LoRALinear):
    """A :class:`LoRALinear` whose composed weight is renormalized per output row.

    Adds one trainable ``magnitude`` vector (``out_features`` entries, allocated
    from the base weight's dtype and device, meta included). Everything else —
    the ``lora_A`` / ``lora_B`` initialization, the frozen base, the inherited
    train/eval flag, alpha / r / dropout validation — is LoRA's.
    """

    def __init__(self, base: nn.Linear, r: int, alpha: float, dropout: float = 0.0, *,
                 init_weights: bool = True) -> None:
        super().__init__(base, r, alpha, dropout, init_weights=init_weights)
        weight = base.weight
        with torch.no_grad():
            norm = torch.linalg.vector_norm(self._composed(), dim=1)
        # ||W + s·B·A|| at init (B is zero, so ||W||): W' = W, the layer starts as its
        # base. Unclamped: a zero row keeps magnitude 0, so it stays the base's zero row.
        self.magnitude = nn.Parameter(norm.to(dtype=weight.dtype, device=weight.device))
        self._merge_factor: torch.Tensor | None = None
        self._magnitude_flag = True

    # -- the row normalization --------------------------------------------------
    def _composed(self) -> torch.Tensor:
        """``V = W + (alpha/r)·B·A`` in the compute dtype (FP32 for half layers), detached."""
        ct = _compute_dtype(self.base.weight.dtype)
        w = self.base.weight.detach().to(ct)
        a = self.lora_A.weight.detach().to(ct)
        b = self.lora_B.weight.detach().to(ct)
        return torch.addmm(w, b, a, alpha=self.scaling)

    def _row_norm(self) -> torch.Tensor:
        """``||V||`` per output row, clamped at NORM_EPS, a constant (no graph)."""
        norm: torch.Tensor = torch.linalg.vector_norm(self._composed(), dim=1)
        return norm.clamp_min(NORM_EPS)

    def row_scale(self) -> torch.Tensor:
        """``magnitude / ||V||`` per output row, in the layer dtype.

        Differentiable in ``magnitude`` only: the norm is detached (paper §4.3).
        """
        dtype = self.base.weight.dtype
        with torch.no_grad():
            norm = self._row_norm()
        scale = self.magnitude.to(norm.dtype) / norm
        if dtype in _HALF:
            # A zero row of V with a nonzero magnitude (one loaded onto a pruned base)
            # gives magnitude / NORM_EPS, beyond FP16's range: inf times the row's 0
            # would be NaN. Bounded, the row stays a finite 0.
            big = torch.finfo(dtype).max
            scale = scale.clamp(-big, big)
        return scale.to(dtype)

    def effective_weight(self) -> torch.Tensor:
        """``W' = magnitude ⊙ V / ||V||`` in the layer dtype (detached), what merging writes."""
        if self.merged:
            return self.base.weight.detach().clone()
        v = self._composed()  # built once: its row norms and W' both come from it
        norm = torch.linalg.vector_norm(v, dim=1).clamp_min(NORM_EPS)
        scale = self.magnitude.detach().to(v.dtype) / norm
        composed: torch.Tensor = (scale.unsqueeze(1) * v).to(self.base.weight.dtype)
        return composed

    # -- forward ----------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.merged:  # W' already lives in base.weight
            out: torch.Tensor = self.base(x)
            return out
        weight, bias = self.base.weight, self.base.bias
        no_dropout = isinstance(self.lora_dropout, nn.Identity) or not self.training
        if no_dropout and not self._tracks_grad():
            # Inference (no_grad, or nothing to train): one matmul with W'. V is built
            # every forward for its row norms anyway, so W' costs one more pass over the
            # weight instead of the adapter's passes over the (larger) output.
            fast: torch.Tensor = F.linear(x, self.effective_weight(), bias)
            return fast
        scale = self.row_scale()
        if no_dropout:
            # s ⊙ (W x + (alpha/r)·B(A x)) + b: W' x + b without building W'. B's
            # product accumulates into W x (one addmm), and the scale and bias are one
            # addcmul: two passes over the output beyond the matmuls.
            rows = x.reshape(-1, x.shape[-1])
            inner = torch.addmm(F.linear(rows, weight), self.lora_A(rows),
                                self.lora_B.weight.t(), alpha=self.scaling)
            inner = inner.view(*x.shape[:-1], inner.shape[-1])
            return inner * scale if bias is None else torch.addcmul(bias, inner, scale)
        # Training with dropout: the composed update W' - W sees dropout(x).
        frozen: torch.Tensor = self.base(x)
        dropped = self.lora_dropout(x)
        wx = F.linear(dropped, weight)
        update: torch.Tensor = self.lora_B(self.lora_A(dropped)) * self.scaling
        return frozen + (scale - 1) * wx + scale * update

    def _tracks_grad(self) -> bool:
        """Whether autograd must see W' as a function of W, A, B and magnitude.

        (The bias enters F.linear as itself, and an input's gradient through a
        constant W' is exact, so neither needs the differentiable path.)
        """
        return torch.is_grad_enabled() and any(
            p.requires_grad for p in (self.base.weight, self.lora_A.weight,
                                      self.lora_B.weight, self.magnitude))

    # -- merging (nnx.peft merging calls these per wrapper) ----------------------
    def delta_weight(self) -> torch.Tensor:
        """``W' - W``, what :meth:`merge` adds to ``base.weight`` (layer dtype)."""
        ct = _compute_dtype(self.base.weight.dtype)
        if self.merged:
            merged = self.base.weight.detach().to(ct)
            return (merged - self._unmerged_weight(merged)).to(self.base.weight.dtype)
        return (self.effective_weight().to(ct)
                - self.base.weight.detach().to(ct)).to(self.base.weight.dtype)

    def _unmerged_weight(self, merged: torch.Tensor) -> torch.Tensor:
        # W = W' / factor - (alpha/r)·B·A, with the factor recorded at merge time:
        # the norm must be the unmerged one, which the merged weight no longer gives.
        assert self._merge_factor is not None
        a = self.lora_A.weight.detach().to(merged.dtype)
        b = self.lora_B.weight.detach().to(merged.dtype)
        return torch.addmm(merged / self._merge_factor.unsqueeze(1), b, a, alpha=-self.scaling)

    def merge(self) -> bool:
        """Write ``W'`` (magnitude folded in) into ``base.weight``; False if already merged.

        While merged, lora_A, lora_B and magnitude are frozen (forward is
        ``base(x)`` alone, so training could not count the update twice).
        """
        if self.merged:
            return False
        with torch.no_grad():
            factor = self.magnitude.detach().to(_compute_dtype(self.magnitude.dtype))
            factor = factor / self._row_norm()
            self.base.weight.copy_(self.effective_weight())
        self._merge_factor = factor
        self._merge_flags = (self.lora_A.weight.requires_grad, self.lora_B.weight.requires_grad)
        self._magnitude_flag = self.magnitude.requires_grad
        for p in (self.lora_A.weight, self.lora_B.weight, self.magnitude):
            p.requires_grad_(False)
        self.merged = True
        return True

    def unmerge(self) -> bool:
        """Recover ``W`` from the merged weight; False if not merged."""
        if not self.merged:
            return False
        ct = _compute_dtype(self.base.weight.dtype)
        with torch.no_grad():
            restored = self._unmerged_weight(self.base.weight.detach().to(ct))
            self.base.weight.copy_(restored.to(self.base.weight.dtype))
        a_flag, b_flag = self._merge_flags or (True, True)
        self.lora_A.weight.requires_grad_(a_flag)
        self.lora_B.weight.requires_grad_(b_flag)
        self.magnitude.requires_grad_(self._magnitude_flag)
        self._merge_flags = None
        self._merge_factor = None
        self.merged = False
        return True


def apply_dora_to(module: nn.Module, *patterns: str, r: int, alpha: float,
                  dropout: float = 0.0) -> int:
    """Wrap every ``nn.Linear`` a glob selects in a :class:`DoRALinear`; the new count.

    The same matching, refusals and idempotence as ``apply_lora_to`` (spec §11
    "Shared modules"): everything is validated before the first wrapper is
    built, and a path already holding any adapter wrapper is left alone.
    """
    rank, scale, drop = check_lora_args("apply_dora_to", r, alpha, dropout)
    slots = select_linear_slots(module, patterns, what="apply_dora_to")
    return replace_slots(slots, lambda linear: DoRALinear(linear, rank, scale, drop))
