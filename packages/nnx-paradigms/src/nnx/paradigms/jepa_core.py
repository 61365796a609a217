"""What the I-JEPA step and objective share (spec §6.5, §10, §14.1; docs/jepa.md).

Layout (the one the docs page documents):

* a batch has exactly one positional input (split by the model's batch adapter): the
  patches, a floating tensor ``(B, N, P)`` — N patches of P features each;
* ``mask_fn(batch_size, n_patches, generator) -> (context_idx, target_idx)``: two
  LongTensors ``(B, n_ctx)`` / ``(B, n_tgt)`` of patch indices in ``[0, N)``, each row's
  context and target disjoint;
* the context encoder is ``model.net(patches, context_idx) -> (B, n_ctx, D)``; the target
  encoder has the same call and runs over every patch (``idx = arange(N)``); its
  latents are layer-normalized (no affine, as I-JEPA does) and gathered at
  ``target_idx``;
* ``predictor(context_latents, context_idx, target_idx) -> (B, n_tgt, D)`` is a submodule
  of ``model.net`` (so the run's optimizer trains it and the checkpoint holds it);
* the loss is one normalized term, ``"latent_mse"``: the squared error summed over every
  element of the predicted target latents, over the element count.

The EMA target pairs its parameters with ``model.net``'s by name, leaving out the
predictor's subtree: ``target ← m·target + (1 − m)·online`` for parameters, buffers
copied. A target built as ``copy.deepcopy(model.net)`` is accepted too; its copy of the
predictor is never used nor updated.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from nnx.extend import PROBABILITY, check_real

__all__ = ["JEPACore", "MaskFn"]

#: ``mask_fn(batch_size, n_patches, generator) -> (context_idx, target_idx)``.
MaskFn = Callable[[int, int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


def _index(name: str, idx: Any, batch: int, n: int) -> torch.Tensor:
    if not isinstance(idx, torch.Tensor) or idx.dim() != 2 or idx.shape[0] != batch or (
            idx.dtype != torch.long):
        got = f"{idx.dtype} of shape {tuple(idx.shape)}" if isinstance(idx, torch.Tensor) else (
            type(idx).__name__)
        raise ValueError(f"jepa mask_fn must return {name} as a LongTensor of shape "
                         f"({batch}, n); got {got}")
    if idx.shape[1] == 0:
        raise ValueError(f"jepa mask_fn returned an empty {name}: each row needs >= 1 patch")
    if int(idx.min()) < 0 or int(idx.max()) >= n:
        raise ValueError(f"jepa mask_fn returned {name} outside [0, {n}): min "
                         f"{int(idx.min())}, max {int(idx.max())}")
    return idx


class JEPACore:
    """The shared pieces: validation, the masked latent loss and the EMA target."""

    def __init__(self, who: str, target_encoder: Any, predictor: Any, mask_fn: Any,
                 ema_momentum: Any) -> None:
        if not isinstance(target_encoder, nn.Module):
            raise TypeError(f"{who}: target_encoder must be an nn.Module (an EMA copy of the "
                            f"context encoder); got {type(target_encoder).__name__}")
        if not isinstance(predictor, nn.Module):
            raise TypeError(f"{who}: predictor must be an nn.Module inside model.net; got "
                            f"{type(predictor).__name__}")
        if not callable(mask_fn):
            raise TypeError(f"{who}: mask_fn must be callable (batch_size, n_patches, "
                            f"generator) -> (context_idx, target_idx); got "
                            f"{type(mask_fn).__name__}")
        self.who = who
        self.target = target_encoder
        self.predictor = predictor
        self.mask_fn = mask_fn
        self.momentum = float(check_real(f"{who} ema_momentum", ema_momentum, PROBABILITY))
        self.updates = 0  # committed EMA updates
        self.layout: tuple[int, int] | None = None  # (N, P), from the first batch
        self.predictor_path: str | None = None
        self._pairs: list[tuple[torch.Tensor, torch.Tensor]] | None = None
        self._buffers: list[tuple[torch.Tensor, torch.Tensor]] = []
        self._frozen = False
        self._net: nn.Module | None = None

    # -- binding to the trained net ------------------------------------------------------
    def bind(self, net: nn.Module) -> None:
        """Check the target and predictor against ``net`` and pair their parameters (once).

        Nothing is mutated here: :meth:`freeze` runs only once a batch passed every check,
        so a refused run leaves the target as it was."""
        if self._pairs is not None and net is self._net:
            return
        who = self.who
        if self.target is net:
            raise ValueError(f"{who}: the target encoder must be a copy of model.net, not "
                             "model.net itself (copy.deepcopy(model.net))")
        path = next((n for n, m in net.named_modules() if m is self.predictor), None)
        if path is None or path == "":
            raise ValueError(f"{who}: the predictor must be a submodule of model.net (so the "
                             "run's optimizer trains it and the checkpoint holds it)")
        online = {id(p) for p in net.parameters()}
        if any(id(p) in online for p in self.target.parameters()):
            raise ValueError(f"{who}: the target encoder shares parameters with model.net; "
                             "pass copy.deepcopy(model.net)")
        prefix = path + "."
        params = {n: p for n, p in net.named_parameters() if not n.startswith(prefix)}
        target = dict(self.target.named_parameters())
        inside = {n for n, _ in net.named_parameters() if n.startswith(prefix)}
        # A copy of the encoder part, or a deepcopy of the whole net (predictor unused).
        names = set(params) if set(target) in (set(params), set(params) | inside) else (
            set(target))
        if names != set(params):
            missing, extra = sorted(set(params) - names), sorted(names - set(params))
            raise ValueError(f"{who}: the target encoder's parameters do not mirror model.net "
                             f"without the predictor ({path!r}): missing {missing[:5]}, "
                             f"unexpected {extra[:5]}")
        for n in sorted(names):
            if target[n].shape != params[n].shape:
                raise ValueError(f"{who}: target encoder parameter {n!r} has shape "
                                 f"{tuple(target[n].shape)}, model.net's has "
                                 f"{tuple(params[n].shape)}")
        bufs = dict(net.named_buffers())
        self._buffers = [(b, bufs[n]) for n, b in self.target.named_buffers()
                         if n in bufs and b.shape == bufs[n].shape]
        self.predictor_path = path
        self._pairs = [(target[n], params[n]) for n in sorted(names)]
        self._net = net  # another train() on another net pairs again

    def freeze(self) -> None:
        """The target never trains: no gradients, eval mode (idempotent)."""
        if self._frozen:
            return
        for p in self.target.parameters():
            p.requires_grad_(False)
        self.target.eval()
        self._frozen = True

    # -- the loss ------------------------------------------------------------------------
    @staticmethod
    def patches(model: Any, batch: Any, who: str) -> torch.Tensor:
        inputs, _ = model.split_batch(batch)
        # One input, positional or keyword (spec §6.5): a keyword only names which batch
        # entry holds the patches, since the encoders are always called positionally.
        kwargs = getattr(inputs, "kwargs", None) or {}
        if len(inputs) + len(kwargs) != 1:
            raise ValueError(f"{who} needs batches with exactly one input (the patches); "
                             f"the batch adapter yielded {len(inputs)} positional and "
                             f"{len(kwargs)} keyword input(s)")
        x = inputs[0] if len(inputs) else next(iter(kwargs.values()))
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() != 3:
            got = f"{x.dtype} of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else (
                type(x).__name__)
            raise ValueError(f"{who} needs the patches as a floating tensor (B, N, P); got "
                             f"{got}")
        return x

    def masks(self, x: torch.Tensor, generator: torch.Generator
              ) -> tuple[torch.Tensor, torch.Tensor]:
        b, n, p = x.shape
        if self.layout is not None and self.layout != (n, p):
            raise ValueError(f"{self.who}: this run's patches are (N={n}, P={p}), but the "
                             f"objective was trained on (N={self.layout[0]}, "
                             f"P={self.layout[1]}): keep one patch layout per run")
        ctx_idx, tgt_idx = self.mask_fn(b, n, generator)
        ctx_idx = _index("context_idx", ctx_idx, b, n)
        tgt_idx = _index("target_idx", tgt_idx, b, n)
        # A target patch the context also sees would leak its own answer.
        overlap = (ctx_idx.unsqueeze(2) == tgt_idx.unsqueeze(1)).any()
        if bool(overlap):
            raise ValueError(f"{self.who}: mask_fn's context and target share a patch in "
                             "some row; each row's context and target must be disjoint")
        self.layout = (n, p)
        return ctx_idx.to(x.device), tgt_idx.to(x.device)

    def target_latents(self, x: torch.Tensor, tgt_idx: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        every = torch.arange(n, device=x.device).expand(b, n)
        self.freeze()
        with torch.no_grad():
            self.target.eval()
            h = self.target(x, every)
            if not isinstance(h, torch.Tensor) or h.dim() != 3 or h.shape[:2] != (b, n):
                got = tuple(h.shape) if isinstance(h, torch.Tensor) else type(h).__name__
                raise ValueError(f"{self.who}: the target encoder must return (B, N, D) = "
                                 f"({b}, {n}, D) latents; got {got}")
            h = F.layer_norm(h.float(), (h.shape[-1],))
            return torch.gather(h, 1, tgt_idx.unsqueeze(-1).expand(-1, -1, h.shape[-1]))

    def squared_error(self, context: torch.Tensor, ctx_idx: torch.Tensor,
                      tgt_idx: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Σ (predictor(context) − target)² over every element (a differentiable sum)."""
        pred = self.predictor(context, ctx_idx, tgt_idx)
        if not isinstance(pred, torch.Tensor) or pred.shape != target.shape:
            got = tuple(pred.shape) if isinstance(pred, torch.Tensor) else type(pred).__name__
            raise ValueError(f"{self.who}: the predictor returned {got} for target latents "
                             f"of shape {tuple(target.shape)}")
        return (pred.float() - target).pow(2).sum()

    # -- the EMA -------------------------------------------------------------------------
    @torch.no_grad()
    def advance(self) -> None:
        """One EMA step of the target toward the online encoder (per committed update)."""
        assert self._pairs is not None, "bind() runs before the first update"
        m = self.momentum
        for t, o in self._pairs:
            t.mul_(m).add_(o.detach().to(t.dtype), alpha=1.0 - m)
        for t, o in self._buffers:
            t.copy_(o)
        self.updates += 1

    # -- component state -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {"momentum": self.momentum, "updates": self.updates,
                "layout": None if self.layout is None else list(self.layout),
                "predictor": self.predictor_path,
                "target": {k: v.detach().clone() for k, v in self.target.state_dict().items()}}

    def problems(self, name: str, state: Any) -> list[str]:
        if not isinstance(state, dict):
            return [f"{name}: the saved state is not a mapping"]
        out = []
        if state.get("momentum") != self.momentum:
            out.append(f"{name}: the checkpoint was trained with ema_momentum="
                       f"{state.get('momentum')}, this run's is {self.momentum}: resume with "
                       "the same momentum")
        saved = state.get("target")
        mine = self.target.state_dict()
        if not isinstance(saved, dict) or set(saved) != set(mine):
            out.append(f"{name}: the saved target encoder has other tensors than this run's")
        else:
            for k in sorted(mine):
                v = saved[k]
                if not isinstance(v, torch.Tensor) or v.shape != mine[k].shape:
                    got = tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__
                    out.append(f"{name}: the saved target encoder's {k!r} is {got}, this "
                               f"run's is {tuple(mine[k].shape)} (another patch layout?)")
        layout = state.get("layout")
        if layout is not None and self.layout is not None and tuple(layout) != self.layout:
            out.append(f"{name}: the checkpoint's patch layout (N, P)={tuple(layout)} differs "
                       f"from this run's {self.layout}")
        predictor = state.get("predictor")
        if predictor is not None and self.predictor_path is not None and (
                predictor != self.predictor_path):
            out.append(f"{name}: the checkpoint's predictor is model.net.{predictor}, this "
                       f"run's is model.net.{self.predictor_path}")
        return out

    def load(self, state: dict[str, Any]) -> None:
        self.target.load_state_dict(state["target"])
        self.updates = int(state["updates"])
        layout = state.get("layout")
        self.layout = None if layout is None else (int(layout[0]), int(layout[1]))
