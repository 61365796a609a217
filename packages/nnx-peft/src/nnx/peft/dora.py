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
* Two forward formulas, equal to rounding: the factored
  ``y = s ⊙ (W x + (alpha/r)·B(A x)) + b`` with the row scale
  ``s = magnitude / ||V||``, and the composed ``F.linear(x, W', b)``. When
  autograd must see the adapter (grad enabled and W, A, B or magnitude
  trainable) the factored one, with the norm recomputed every forward. Otherwise
  (eval, ``no_grad``, ``inference_mode``) whichever is cheaper for the input's
  row count (:func:`_factored_is_cheaper`), with the norm from the cache below.
* The norm cache. ``||V||`` depends on W, A, B and alpha/r only (not on
  ``magnitude``), so it is kept, one vector of ``out_features``, keyed on those
  tensors' identity, version counter, storage, dtype and device, on alpha/r and
  on a count of ``torch.optim`` steps: any in-place write (an optimizer step,
  ``load_state_dict``, ``w.add_`` under ``no_grad``, ``merge`` / ``unmerge``)
  and any ``Optimizer.step`` (fused optimizers write without bumping version
  counters) invalidate it; so do ``.to()`` / ``.half()`` (``_apply``). A write
  through ``.data`` bypasses version counters and is not seen. The cache is not
  state: it stays out of ``state_dict`` and is dropped by pickling / deepcopy.
* Dropout, as HF PEFT: the composed update ``W' - W`` sees ``dropout(x)`` while
  the frozen path sees ``x``: ``y = W x + b + (W' - W)·dropout(x)``. With no
  dropout active (p = 0 or eval) this is the plain ``W' x + b`` above.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim.optimizer import register_optimizer_step_post_hook

from nnx.peft.lora import LoRALinear, check_lora_args
from nnx.peft.targeting import replace_slots, select_linear_slots

__all__ = ["NORM_EPS", "DoRALinear", "apply_dora_to"]

#: Lower clamp of a row norm (as ``F.normalize``'s eps): a zero row of V then has
#: scale ``magnitude / NORM_EPS``, finite, times a zero row: a finite zero output.
NORM_EPS = 1e-12

_HALF = (torch.float16, torch.bfloat16)


def _compute_dtype(dtype: torch.dtype) -> torch.dtype:
    return torch.float32 if dtype in _HALF else dtype


class _OptimizerSteps:
    """How many ``torch.optim`` steps this process has taken (a norm-cache key part).

    Fused optimizers (``fused=True``) write parameters without bumping their
    version counters, so versions alone would let a cached norm outlive a step.
    The hook is registered once, on the first DoRALinear built, and only counts.
    """

    count = 0
    _handle: Any = None

    @classmethod
    def install(cls) -> None:
        if cls._handle is None:
            cls._handle = register_optimizer_step_post_hook(cls._tick)

    @classmethod
    def _tick(cls, _optimizer: object, _args: object, _kwargs: object) -> None:
        cls.count += 1


def _factored_is_cheaper(rows: int, out_f: int, in_f: int, r: int) -> bool:
    """Whether ``s ⊙ (W x + B(A x))`` costs less than building ``W'`` for this input.

    Beyond the shared ``W x``: the factored form does ``rows·r·(in + out)``
    multiply-adds and one pass over the output; composing does ``out·in·r`` and
    about two passes over the weight (the scaled copy, its cast). With few rows
    (decoding, small batches) factored wins by far; with many, composing does.
    """
    return rows * (r * (in_f + out_f) + out_f) < out_f * in_f * (r + 2)


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
        # (key, weak refs to W / A / B, the clamped norm); see the module docstring.
        self._norm_cache: tuple[tuple[Any, ...], tuple[Any, ...], torch.Tensor] | None = None
        _OptimizerSteps.install()

    # -- the row normalization --------------------------------------------------
    def _composed(self) -> torch.Tensor:
        """``V = W + (alpha/r)·B·A`` in the compute dtype (FP32 for half layers), detached."""
        ct = _compute_dtype(self.base.weight.dtype)
        w = self.base.weight.detach().to(ct)
        a = self.lora_A.weight.detach().to(ct)
        b = self.lora_B.weight.detach().to(ct)
        return torch.addmm(w, b, a, alpha=self.scaling)

    def _norm_key(self) -> tuple[tuple[Any, ...], tuple[torch.Tensor, ...]] | None:
        """What the cached norm was computed from, and W, A, B; None where it cannot be told."""
        tensors = (self.base.weight, self.lora_A.weight, self.lora_B.weight)
        if any(t.is_inference() for t in tensors):  # no version counter to key on
            return None
        key = tuple((t._version, t.data_ptr(), t.dtype, t.device) for t in tensors)
        return (*key, self.scaling, _OptimizerSteps.count), tensors

    def _row_norm(self, *, reuse: bool = True) -> torch.Tensor:
        """``||V||`` per output row, clamped at NORM_EPS, a constant (no graph).

        ``reuse`` takes the cached vector while W, A, B are unchanged; either way
        the fresh value is cached. Bitwise the same value as recomputing it.
        """
        key = self._norm_key()
        cached = self._norm_cache
        if (reuse and key is not None and cached is not None and cached[0] == key[0]
                and all(ref() is t for ref, t in zip(cached[1], key[1], strict=True))):
            norm = cached[2]
            if norm.is_inference() and not torch.is_inference_mode_enabled():
                # Built under inference_mode: autograd may not save it (magnitude / norm
                # does); a normal copy, once, serves every later mode.
                norm = norm.clone()
                self._norm_cache = (cached[0], cached[1], norm)
            return norm
        with torch.no_grad():
            fresh: torch.Tensor = torch.linalg.vector_norm(self._composed(), dim=1)
            norm = fresh.clamp_min(NORM_EPS)
        self._norm_cache = None if key is None else (
            key[0], tuple(map(weakref.ref, key[1])), norm)
        return norm

    def _apply(self, fn: Any, recurse: bool = True) -> DoRALinear:
        # .to() / .half() / .cuda() replace the parameters' data: drop the cached norm.
        self._norm_cache = None
        super()._apply(fn, recurse)  # type: ignore[no-untyped-call]
        return self

    def __getstate__(self) -> dict[str, Any]:
        # Weak references do not pickle, and a cache is not state (deepcopy, torch.save).
        state: dict[str, Any] = dict(super().__getstate__())  # type: ignore[no-untyped-call]
        state["_norm_cache"] = None
        return state

    def _scale(self, norm: torch.Tensor) -> torch.Tensor:
        """``magnitude / norm`` in the layer dtype, differentiable in ``magnitude``."""
        dtype = self.base.weight.dtype
        scale = self.magnitude.to(norm.dtype) / norm
        if dtype in _HALF:
            # A zero row of V with a nonzero magnitude (one loaded onto a pruned base)
            # gives magnitude / NORM_EPS, beyond FP16's range: inf times the row's 0
            # would be NaN. Bounded, the row stays a finite 0.
            big = torch.finfo(dtype).max
            scale = scale.clamp(-big, big)
        return scale.to(dtype)

    def row_scale(self) -> torch.Tensor:
        """``magnitude / ||V||`` per output row, in the layer dtype.

        Differentiable in ``magnitude`` only: the norm is detached (paper §4.3).
        """
        return self._scale(self._row_norm())

    def effective_weight(self) -> torch.Tensor:
        """``W' = magnitude ⊙ V / ||V||`` in the layer dtype (detached), what merging writes."""
        if self.merged:
            return self.base.weight.detach().clone()
        return self._composed_weight(None)

    def _composed_weight(self, norm: torch.Tensor | None) -> torch.Tensor:
        """``W'`` from ``V``, with ``V``'s row norms taken from it unless ``norm`` is given."""
        v = self._composed()  # built once: W' (and its row norms when not given) from it
        if norm is None:
            norm = torch.linalg.vector_norm(v, dim=1).clamp_min(NORM_EPS)
        scale = self.magnitude.detach().to(v.dtype) / norm
        composed: torch.Tensor = (scale.unsqueeze(1) * v).to(self.base.weight.dtype)
        return composed

    # -- forward ----------------------------------------------------------------
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.merged:  # W' already lives in base.weight
            out: torch.Tensor = self.base(x)
            return out
        no_dropout = isinstance(self.lora_dropout, nn.Identity) or not self.training
        if no_dropout and not self._tracks_grad():
            return self._inference_forward(x)
        # Autograd sees the adapter: the norm afresh, once (training changes W, A, B).
        scale = self._scale(self._row_norm(reuse=False))
        if no_dropout:
            return self._factored(x, scale)
        weight = self.base.weight
        # Training with dropout: the composed update W' - W sees dropout(x).
        frozen: torch.Tensor = self.base(x)
        dropped = self.lora_dropout(x)
        wx = F.linear(dropped, weight)
        update: torch.Tensor = self.lora_B(self.lora_A(dropped)) * self.scaling
        return frozen + (scale - 1) * wx + scale * update

    def _inference_forward(self, x: torch.Tensor) -> torch.Tensor:
        """Eval / ``no_grad``: the cached norm, and the cheaper of the two formulas."""
        norm = self._row_norm()
        rows = x.numel() // max(x.shape[-1], 1)
        if _factored_is_cheaper(rows, self.base.out_features, self.base.in_features, self.r):
            return self._factored(x, self._scale(norm))
        out: torch.Tensor = F.linear(x, self._composed_weight(norm), self.base.bias)
        return out

    def _factored(self, x: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
        """``s ⊙ (W x + (alpha/r)·B(A x)) + b``: W' x + b without building W'.

        B's product accumulates into W x (one addmm), and the scale and bias are
        one addcmul: two passes over the output beyond the matmuls.
        """
        bias = self.base.bias
        rows = x.reshape(-1, x.shape[-1])
        inner = torch.addmm(F.linear(rows, self.base.weight), self.lora_A(rows),
                            self.lora_B.weight.t(), alpha=self.scaling)
        inner = inner.view(*x.shape[:-1], inner.shape[-1])
        out: torch.Tensor = inner * scale if bias is None else torch.addcmul(bias, inner, scale)
        return out

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
            norm = self._row_norm()  # V built once (or not at all, cached) for both
            factor = factor / norm
            self.base.weight.copy_(self._composed_weight(norm))
        self._merge_factor = factor
        self._norm_cache = None  # base.weight now holds W' (its version moved too)
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
        self._norm_cache = None
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
