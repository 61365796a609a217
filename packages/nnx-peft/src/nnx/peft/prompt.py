"""PromptTuner (spec §11): learned soft-prompt embeddings ahead of a frozen TransformerNN's input.

The net is frozen and otherwise untouched (unlike PrefixTuner nothing is
patched): the tuner embeds the ids, puts its ``soft_prompt`` in front, runs the
net over the concatenated embeddings and returns the logits of the input
positions only, so it drops in wherever the net's ``(batch, T, vocab)`` logits
were used (a causal-LM loss over the same targets, for instance).
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from nnx.extend import check_count
from nnx.peft.adapter_files import Source, load_owned, save_owned
from nnx.peft.lm_protocol import KVCache, LMNet, require_transformer

__all__ = ["PromptTuner", "load_prompt_weights", "save_prompt_weights"]

#: ``"random"`` (N(0, 1), HF's RANDOM), ``"vocab"`` (rows of random vocabulary ids,
#: HF's SAMPLE_VOCAB), or token ids whose embeddings start the prompt (HF's TEXT).
PromptInit = str | Sequence[int] | torch.Tensor


class PromptTuner(nn.Module):
    """``PromptTuner(net, n_virtual_tokens, init="random")`` over a TransformerNN ``net``.

    ``soft_prompt`` is ``(n_virtual_tokens, d_model)``, allocated with the token
    embedding's dtype and device; every parameter of ``net`` is frozen. The
    virtual tokens occupy positions ``0 … n-1`` and the input follows them, so
    ``n_virtual_tokens + T`` must fit the net's ``max_seq_len``.
    """

    def __init__(self, net: nn.Module, n_virtual_tokens: int, *,
                 init: PromptInit = "random") -> None:
        lm = require_transformer("PromptTuner", net)
        n = check_count("PromptTuner n_virtual_tokens", n_virtual_tokens,
                        maximum=lm.params.max_seq_len - 1)  # leave room for one real token
        weight = lm.embed.weight
        start = _initial_prompt(init, n, weight)  # validated before anything changes
        super().__init__()
        self.net = net
        self.n_virtual_tokens = n
        self.soft_prompt = nn.Parameter(start)
        for p in net.parameters():
            p.requires_grad_(False)
        # Runtime mode follows the wrapped net; never .train()/.eval() on it (§11).
        self.training = net.training

    @property
    def _lm(self) -> LMNet:
        return self.net  # type: ignore[return-value]  # checked at construction

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits ``(batch, T, vocab)`` for the input positions (virtual ones stripped)."""
        return self.forward_with_cache(ids)[0]

    def forward_with_cache(self, ids: torch.Tensor, cache: KVCache | None = None
                           ) -> tuple[torch.Tensor, KVCache]:
        """Like ``TransformerNN.forward_with_cache``: the first call (``cache=None``) puts
        the soft prompt ahead of ``ids``; later calls continue from the cache, which
        holds the virtual positions too. Only the input positions' logits come back."""
        if ids.dim() != 2:
            raise ValueError(f"PromptTuner takes token ids of shape (batch, T); got "
                             f"{tuple(ids.shape)}")
        embeds = self._lm.embed(ids)
        if cache is not None:
            return self._lm.forward_embeddings(embeds, cache)
        prompt = self.soft_prompt.unsqueeze(0).expand(ids.shape[0], -1, -1)
        logits, cache = self._lm.forward_embeddings(torch.cat((prompt, embeds), dim=1))
        return logits[:, self.n_virtual_tokens:], cache

    def prompt_state_dict(self) -> dict[str, torch.Tensor]:
        """The tuner's own trainable tensor, ``{"soft_prompt": ...}`` (detached)."""
        return {"soft_prompt": self.soft_prompt.detach()}


def save_prompt_weights(tuner: PromptTuner, path: str | os.PathLike[str]) -> Path:
    """Write only ``tuner``'s soft prompt to ``path`` (atomically); the path written."""
    if not isinstance(tuner, PromptTuner):
        raise TypeError(f"save_prompt_weights takes a PromptTuner; got {type(tuner).__name__}")
    return save_owned(tuner.prompt_state_dict(), path)


def load_prompt_weights(tuner: PromptTuner, source: Source) -> int:
    """Load ``soft_prompt`` from a path or state dict into ``tuner``; the count loaded (1).

    Any other key in ``source`` (a full tuner checkpoint's ``net.*``) is ignored.
    """
    if not isinstance(tuner, PromptTuner):
        raise TypeError(f"load_prompt_weights takes a PromptTuner; got {type(tuner).__name__}")
    return load_owned("load_prompt_weights", tuner, {"soft_prompt": tuner.soft_prompt}, source,
                      complete=True, describe="the soft prompt")


def _initial_prompt(init: PromptInit, n: int, weight: torch.Tensor) -> torch.Tensor:
    """The starting ``(n, d_model)`` prompt, in ``weight``'s dtype and on its device."""
    vocab, d = weight.shape
    if isinstance(init, str):
        if init == "random":  # nn.Embedding's default init, as HF's RANDOM
            return torch.randn(n, d, dtype=weight.dtype, device=weight.device)
        if init == "vocab":
            drawn = torch.randint(0, vocab, (n,), device=weight.device)
            return weight.detach()[drawn].clone()
        raise ValueError(f"PromptTuner init must be 'random', 'vocab' or a sequence of token "
                         f"ids; got {init!r}")
    given: object = init
    if isinstance(init, torch.Tensor):
        if init.dim() != 1 or init.dtype.is_floating_point or init.dtype.is_complex \
                or init.dtype == torch.bool:
            raise ValueError(f"PromptTuner init ids must be a 1-D integer tensor; got "
                             f"{init.dtype} of shape {tuple(init.shape)}")
        given = [int(i) for i in init.tolist()]
    if not isinstance(given, Sequence) or isinstance(given, bytes):
        raise TypeError(f"PromptTuner init must be 'random', 'vocab' or a sequence of token "
                        f"ids; got {type(given).__name__}")
    ids = [check_count(f"PromptTuner init[{i}]", v, minimum=0, maximum=vocab - 1)
           for i, v in enumerate(given)]
    if not ids:
        raise ValueError("PromptTuner init ids are empty; give at least one token id")
    # As HF's TEXT init: repeat the ids to cover n, then cut to n.
    ids = (ids * math.ceil(n / len(ids)))[:n]
    index = torch.tensor(ids, dtype=torch.long, device=weight.device)
    return weight.detach()[index].clone()
