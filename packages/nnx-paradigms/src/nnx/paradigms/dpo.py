"""dpo_train_step_factory (spec §6.1, §10, §15; docs/dpo.md): DPO against a frozen reference.

Batches are ``(prompt, chosen, rejected)`` token-id tensors, each ``(B, L)`` right-padded
with the declared pad id (:class:`~nnx.paradigms.preference.NNPreferenceDataset` builds
them). Each row's completion follows its prompt's real tokens; the policy (``model.net``)
and the reference score ``prompt ‖ completion`` in one forward of 2B rows each, and a
completion's log-probability is the sum of its tokens' next-token log-probs (prompt and
padding masked; causal attention means right padding never reaches a real token). Then

    loss = mean_rows −logsigmoid(β · ((π_c − r_c) − (π_r − r_r)))

(Rafailov et al. 2023), finished through ``finalize_step`` (NaN guard, clipping, one
``report_update``; full-precision-only and imperative). The reference is frozen and in
eval mode from the first batch, and runs under ``no_grad``: it never changes. The record
carries ``chosen_reward`` / ``rejected_reward`` (batch means of β·(π − r)),
``reward_margin`` (their difference) and ``reward_accuracy`` (the fraction of rows whose
chosen reward is strictly greater), as TRL reports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F

from nnx import NNEvaluationDataPoint, TrainStepContext
from nnx.extend import (
    POSITIVE,
    check_count,
    check_real,
    finalize_step,
    full_precision_only,
    imperative_step,
    train_mode,
)
from nnx.paradigms.lm_protocol import transformer_of

__all__ = ["DPOTrainStep", "completion_log_probs", "dpo_loss", "dpo_train_step_factory",
           "join_completion"]

_WHO = "dpo_train_step_factory"


def _check_ids(part: str, ids: Any, pad_id: int) -> torch.Tensor:
    if not isinstance(ids, torch.Tensor) or ids.dim() != 2 or ids.is_floating_point() or (
            ids.is_complex() or ids.dtype == torch.bool):
        got = f"{ids.dtype} of shape {tuple(ids.shape)}" if isinstance(ids, torch.Tensor) else (
            type(ids).__name__)
        raise ValueError(f"{_WHO}: the batch's {part} must be a (B, L) integer tensor of "
                         f"token ids; got {got}")
    real = ids != pad_id
    if ids.shape[1] == 0 or not bool(real[:, 0].all()):
        raise ValueError(f"{_WHO}: every row's {part} needs >= 1 token before its padding")
    # Right padding: once a row pads, it pads to the end (the pad id is never content),
    # i.e. the row's real flags never rise again: one comparison, not three masks.
    if ids.shape[1] > 1 and bool((real[:, 1:] > real[:, :-1]).any()):
        raise ValueError(f"{_WHO}: the batch's {part} has a token after the pad id "
                         f"{pad_id}: right-pad every row (NNPreferenceDataset.loader does)")
    return ids


def join_completion(prompt: torch.Tensor, completion: torch.Tensor, pad_id: int,
                    length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``prompt ‖ completion`` per row, right-padded to ``length``, and the completion mask."""
    b = prompt.shape[0]
    lp = (prompt != pad_id).sum(1, keepdim=True)
    lc = (completion != pad_id).sum(1, keepdim=True)
    pos = torch.arange(length, device=prompt.device).expand(b, length)
    from_prompt = pos < lp
    from_completion = (pos >= lp) & (pos < lp + lc)
    p = prompt.gather(1, pos.clamp(max=prompt.shape[1] - 1))
    c = completion.gather(1, (pos - lp).clamp(0, completion.shape[1] - 1))
    ids = torch.where(from_prompt, p, torch.where(from_completion, c,
                                                  torch.full_like(p, pad_id)))
    return ids, from_completion


def completion_log_probs(logits: torch.Tensor, ids: torch.Tensor,
                         mask: torch.Tensor) -> torch.Tensor:
    """Σ over masked positions t of log p(ids[t] | ids[:t]) per row: ``(B,)``."""
    logp = F.log_softmax(logits[:, :-1].float(), dim=-1)
    token = logp.gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
    return (token * mask[:, 1:]).sum(1)


def dpo_loss(beta: float, policy_chosen: torch.Tensor, policy_rejected: torch.Tensor,
             ref_chosen: torch.Tensor, ref_rejected: torch.Tensor) -> torch.Tensor:
    """mean −logsigmoid(β · ((π_c − r_c) − (π_r − r_r))) over the rows."""
    margin = (policy_chosen - ref_chosen) - (policy_rejected - ref_rejected)
    return -F.logsigmoid(beta * margin).mean()


class DPOTrainStep:
    """The ``train_step_fn`` returned by :func:`dpo_train_step_factory`."""

    def __init__(self, reference: Any, *, beta: float = 0.1, pad_id: int) -> None:
        self.reference_net = transformer_of(_WHO, reference)
        self.reference = reference
        self.beta = float(check_real(f"{_WHO} beta", beta, POSITIVE))
        vocab = self.reference_net.params.vocab_size
        self.pad_id = check_count(f"{_WHO} pad_id", pad_id, minimum=0, maximum=vocab - 1)
        self._bound = False
        full_precision_only(self)
        imperative_step(self)

    def _bind(self, net: Any) -> None:
        """Refuse a reference that is (or shares weights with) the policy; freeze it once."""
        if self._bound:
            return
        if self.reference_net is net:
            raise ValueError(f"{_WHO}: the reference must be a frozen copy of the policy, "
                             "not model.net itself (copy.deepcopy(model))")
        policy = {id(p) for p in net.parameters()}
        if any(id(p) in policy for p in self.reference_net.parameters()):
            raise ValueError(f"{_WHO}: the reference shares parameters with the policy")
        for p in self.reference_net.parameters():
            p.requires_grad_(False)
        self.reference_net.eval()
        self._bound = True

    def _batch(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        if isinstance(batch, Mapping):
            missing = [k for k in ("prompt", "chosen", "rejected") if k not in batch]
            if missing:
                raise ValueError(f"{_WHO}: a mapping batch needs the keys prompt, chosen, "
                                 f"rejected; missing {missing}")
            batch = (batch["prompt"], batch["chosen"], batch["rejected"])
        if not isinstance(batch, (tuple, list)) or len(batch) != 3:
            raise ValueError(f"{_WHO} needs (prompt, chosen, rejected) batches; got "
                             f"{type(batch).__name__} {batch!r:.60}")
        prompt, chosen, rejected = (_check_ids(k, t, self.pad_id)
                                    for k, t in zip(("prompt", "chosen", "rejected"), batch,
                                                    strict=True))
        if not prompt.shape[0] == chosen.shape[0] == rejected.shape[0]:
            raise ValueError(f"{_WHO}: prompt, chosen and rejected hold {prompt.shape[0]}, "
                             f"{chosen.shape[0]} and {rejected.shape[0]} rows")
        return prompt, chosen, rejected

    def __call__(self, ctx: TrainStepContext) -> NNEvaluationDataPoint:
        train_mode(ctx)  # nnx's step factories train in train mode (§11)
        prompt, chosen, rejected = self._batch(ctx.batch)
        device = ctx.model.device
        lp = (prompt != self.pad_id).sum(1)
        length = int(torch.maximum(lp + (chosen != self.pad_id).sum(1),
                                   lp + (rejected != self.pad_id).sum(1)).max())
        limit = self.reference_net.params.max_seq_len
        if length > limit:
            raise ValueError(f"{_WHO}: a prompt + completion holds {length} tokens, past the "
                             f"reference's max_seq_len ({limit})")
        self._bind(ctx.model.net)  # every check passed: only now is the reference frozen
        ids_c, mask_c = join_completion(prompt, chosen, self.pad_id, length)
        ids_r, mask_r = join_completion(prompt, rejected, self.pad_id, length)
        ids = torch.cat([ids_c, ids_r]).to(device)
        mask = torch.cat([mask_c, mask_r]).to(device)
        logits = ctx.model.forward_raw((ids,), net=ctx.train_net)
        vocab = self.reference_net.params.vocab_size
        if logits.shape != (*ids.shape, vocab):
            raise ValueError(f"{_WHO}: the policy returned {tuple(logits.shape)} logits for "
                             f"ids {tuple(ids.shape)}; expected (B, T, {vocab}) as the reference")
        policy = completion_log_probs(logits, ids, mask)
        with torch.no_grad():
            if any(m.training for m in self.reference_net.modules()):  # a callback's flip
                self.reference_net.eval()  # (eval() itself writes every module's flag)
            ref_device = next(iter(self.reference_net.parameters())).device
            ref = completion_log_probs(self.reference_net(ids.to(ref_device)).to(device),
                                       ids, mask)
        b = prompt.shape[0]
        loss = dpo_loss(self.beta, policy[:b], policy[b:], ref[:b], ref[b:])
        with torch.no_grad():
            chosen_r = self.beta * (policy[:b] - ref[:b])
            rejected_r = self.beta * (policy[b:] - ref[b:])
            # The four batch means read back together: one host transfer, not four.
            rewards = torch.stack([chosen_r.mean(), rejected_r.mean(),
                                   (chosen_r - rejected_r).mean(),
                                   (chosen_r > rejected_r).float().mean()]).tolist()
        done = finalize_step(ctx, loss)
        return done.record(chosen_reward=rewards[0], rejected_reward=rewards[1],
                           reward_margin=rewards[2], reward_accuracy=rewards[3])

    def __repr__(self) -> str:
        return f"dpo_train_step_factory(beta={self.beta}, pad_id={self.pad_id})"


def dpo_train_step_factory(reference: Any, *, beta: float = 0.1, pad_id: int) -> DPOTrainStep:
    """A ``train_step_fn`` for DPO preference tuning of an LM against ``reference``."""
    return DPOTrainStep(reference, beta=beta, pad_id=pad_id)
