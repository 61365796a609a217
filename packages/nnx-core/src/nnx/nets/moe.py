"""Mixture-of-experts layers: MoELinear and the MoEFeedFwdNN built from them."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from nnx.nets.feedforward import FeedFwdNN
from nnx.params.moe import NNMoEParams

__all__ = ["MoEFeedFwdNN", "MoELinear"]


class MoELinear(nn.Module):
    """A drop-in for ``nn.Linear`` whose rows are routed to ``top_k`` of ``num_experts``.

    Each row's output is the gate-weighted sum of its chosen experts, the gates
    being its router softmax over the chosen experts renormalized to sum to 1.
    After every forward, ``last_aux_loss`` holds the Switch-Transformer
    load-balancing loss ``num_experts · Σ_e f_e · P_e`` (``f_e``: fraction of
    rows whose top choice is ``e``; ``P_e``: mean router probability of ``e``),
    which is 1 when the load is uniform and grows as routing collapses.
    """

    last_aux_loss: Tensor | None

    def __init__(
        self,
        in_features: int,
        out_features: int,
        *,
        num_experts: int,
        top_k: int,
        bias: bool = True,
    ) -> None:
        super().__init__()
        if num_experts < 2:
            raise ValueError(f"MoELinear needs num_experts >= 2; got {num_experts}")
        if not 1 <= top_k <= num_experts:
            raise ValueError(
                f"MoELinear needs 1 <= top_k <= num_experts ({num_experts}); got {top_k}"
            )
        self.in_features = in_features
        self.out_features = out_features
        self.num_experts = num_experts
        self.top_k = top_k
        self.experts = nn.ModuleList(
            nn.Linear(in_features, out_features, bias=bias) for _ in range(num_experts)
        )
        self.router = nn.Linear(in_features, num_experts)
        self.last_aux_loss = None

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim == 0 or x.shape[-1] != self.in_features:
            raise ValueError(
                f"MoELinear expects input of shape (..., {self.in_features}); got {tuple(x.shape)}"
            )
        # Like nn.Linear, any leading axes are batch axes: route every row.
        rows = x.reshape(-1, self.in_features)
        probs = torch.softmax(self.router(rows), dim=-1)  # (R, E)
        top_p, top_e = probs.topk(self.top_k, dim=-1)
        gates = torch.zeros_like(probs).scatter(-1, top_e, top_p / top_p.sum(-1, keepdim=True))
        # Dense evaluation then masking by the zero gates: exact, and at these
        # sizes cheaper than gathering rows per expert.
        expert_out = torch.stack([expert(rows) for expert in self.experts], dim=1)  # (R, E, out)
        out = torch.einsum("re,reo->ro", gates, expert_out)
        self.last_aux_loss = self._balance_loss(probs, top_e[:, 0])
        return out.reshape(*x.shape[:-1], self.out_features)

    def _balance_loss(self, probs: Tensor, top1: Tensor) -> Tensor:
        if probs.shape[0] == 0:  # no rows, no imbalance (and no NaN from an empty mean)
            return probs.sum()
        # f_e comes from an argmax and carries no gradient; the loss trains the
        # router through P_e. (one_hot + mean rather than bincount, which has no
        # deterministic CUDA kernel under torch.use_deterministic_algorithms.)
        frac = nn.functional.one_hot(top1, self.num_experts).to(probs.dtype).mean(dim=0)
        return self.num_experts * torch.sum(frac * probs.mean(dim=0))

    def __getstate__(self) -> dict[str, Any]:
        # The aux loss is a graph-connected non-leaf tensor that deepcopy and
        # pickle refuse; it is per-forward scratch, so copies start without it.
        state: dict[str, Any] = super().__getstate__()  # type: ignore[no-untyped-call]
        state["last_aux_loss"] = None
        return state

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"num_experts={self.num_experts}, top_k={self.top_k}"
        )


class MoEFeedFwdNN(FeedFwdNN):
    """FeedFwdNN whose hidden layers are MoELinear; the output layer stays a plain Linear.

    Add :meth:`aux_loss` to the task loss so the routers keep the experts balanced.
    """

    params: NNMoEParams

    def __init__(self, params: NNMoEParams) -> None:
        super().__init__(params)

    def _hidden_linear(self, in_features: int, out_features: int) -> nn.Module:
        return MoELinear(
            in_features,
            out_features,
            num_experts=self.params.num_experts,
            top_k=self.params.top_k,
        )

    def aux_loss(self) -> Tensor:
        """``aux_loss_weight`` × the sum of the MoE layers' last load-balancing losses."""
        losses = [
            layer.last_aux_loss
            for layer in self.layers
            if isinstance(layer, MoELinear) and layer.last_aux_loss is not None
        ]
        if not losses:  # before any forward: a zero on the params' device and dtype
            return next(self.parameters()).new_zeros(())
        return self.params.aux_loss_weight * torch.stack(losses).sum()
