"""PrefixTuner (spec §11): learned per-layer key/value prefixes in a frozen TransformerNN.

The net is mutated in place: every parameter is frozen and each block's
attention ``forward`` is replaced, on that instance, by a callable that passes
the layer's prefix to nnx-lm's ``attend`` hook (a forward hook fires on the
output, too late to reach K/V). Position convention: the prefix keys are
learned as they are used, after RoPE, and carry no rotation; the input tokens
keep positions ``0 … T-1`` exactly as without the prefix, and every query
attends to every prefix slot. The prefix never enters the KV cache, so a cached
generation sees it at each step exactly as a full recomputation does.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch
from torch import nn

from nnx.extend import check_count
from nnx.peft.adapter_files import Source, load_owned, save_owned
from nnx.peft.lm_protocol import KVCache, LMAttention, LMNet, inner_linear, require_transformer

__all__ = ["PrefixTuner", "load_prefix_weights", "save_prefix_weights"]

#: The names a prefix tuner gives its tensors, whatever its depth.
_PREFIX_NAMES = re.compile(r"prefix_(keys|values)\.\d+")


class _PrefixedAttention:
    """The patched ``forward`` of one attention: ``attend`` with layer ``index``'s prefix.

    A plain object rather than a closure, so ``copy.deepcopy`` of the tuner
    rebinds it to the copied attention and the copied prefix lists (a fork), and
    the tuner stays picklable.
    """

    def __init__(self, attn: LMAttention, keys: nn.ParameterList, values: nn.ParameterList,
                 index: int) -> None:
        self.attn, self.keys, self.values, self.index = attn, keys, values, index

    def __call__(self, x: torch.Tensor, past: tuple[torch.Tensor, torch.Tensor] | None
                 ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        batch = x.shape[0]
        # (heads, P, head_dim) -> (batch, heads, P, head_dim): one prefix for every row.
        k = self.keys[self.index].unsqueeze(0).expand(batch, -1, -1, -1)
        v = self.values[self.index].unsqueeze(0).expand(batch, -1, -1, -1)
        return self.attn.attend(x, past, (k, v))


class PrefixTuner(nn.Module):
    """``PrefixTuner(net, n_prefix)``: ``n_prefix`` learned key/value slots per layer.

    ``prefix_keys[i]`` / ``prefix_values[i]`` are ``(n_heads, n_prefix, head_dim)``,
    allocated N(0, 1) (HF's prefix embedding init) with block ``i``'s ``qkv``
    weight dtype and device, or those of the Linear inside an adapter wrapper
    (``.base``) when ``qkv`` was adapted first; that adapter stays in the path,
    frozen with the rest. Calling the tuner or the patched net gives the same
    logits; ``copy.deepcopy(tuner)`` forks it.
    """

    def __init__(self, net: nn.Module, n_prefix: int) -> None:
        lm = require_transformer("PrefixTuner", net)
        n = check_count("PrefixTuner n_prefix", n_prefix)
        attns = [block.attn for block in lm.blocks]
        patched = [i for i, attn in enumerate(attns) if "forward" in vars(attn)]
        if patched:  # checked before anything changes
            raise ValueError(f"PrefixTuner: the net is already prefix-tuned (the attention "
                             f"forward of blocks {patched} is patched); wrap a fresh net, or "
                             f"copy.deepcopy the existing tuner to fork it")
        super().__init__()
        keys, values = [], []
        for attn in attns:
            weight = inner_linear(attn.qkv).weight
            assert isinstance(weight, torch.Tensor)  # an nn.Linear's
            shape = (attn.n_heads, n, attn.head_dim)
            keys.append(nn.Parameter(torch.randn(shape, dtype=weight.dtype, device=weight.device)))
            values.append(nn.Parameter(torch.randn(shape, dtype=weight.dtype,
                                                   device=weight.device)))
        self.net = net
        self.n_prefix = n
        self.prefix_keys = nn.ParameterList(keys)
        self.prefix_values = nn.ParameterList(values)
        for p in net.parameters():
            p.requires_grad_(False)
        for i, attn in enumerate(attns):
            # An instance attribute shadows the class's forward for this module only.
            object.__setattr__(attn, "forward",
                               _PrefixedAttention(attn, self.prefix_keys, self.prefix_values, i))
        # Runtime mode follows the wrapped net; never .train()/.eval() on it (§11).
        self.training = net.training
        self.prefix_keys.training = self.prefix_values.training = net.training

    @property
    def _lm(self) -> LMNet:
        return self.net  # type: ignore[return-value]  # checked at construction

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """The prefixed net's logits ``(batch, T, vocab)``."""
        return self._lm(ids)

    def forward_with_cache(self, ids: torch.Tensor, cache: KVCache | None = None
                           ) -> tuple[torch.Tensor, KVCache]:
        """The net's ``forward_with_cache``, prefixed; the cache holds only real tokens."""
        return self._lm.forward_with_cache(ids, cache)

    def prefix_state_dict(self) -> dict[str, torch.Tensor]:
        """The tuner's own tensors, ``prefix_keys.i`` then ``prefix_values.i`` (detached)."""
        return {name: p.detach() for name, p in self._owned().items()}

    def _owned(self) -> dict[str, torch.Tensor]:
        owned: dict[str, torch.Tensor] = {}
        for group in ("prefix_keys", "prefix_values"):
            for i, p in enumerate(getattr(self, group)):
                owned[f"{group}.{i}"] = p
        return owned


def save_prefix_weights(tuner: PrefixTuner, path: str | os.PathLike[str]) -> Path:
    """Write only ``tuner``'s prefix keys and values to ``path`` (atomically); the path."""
    if not isinstance(tuner, PrefixTuner):
        raise TypeError(f"save_prefix_weights takes a PrefixTuner; got {type(tuner).__name__}")
    return save_owned(tuner.prefix_state_dict(), path)


def load_prefix_weights(tuner: PrefixTuner, source: Source) -> int:
    """Load every ``prefix_keys.i`` / ``prefix_values.i`` from a path or state dict into
    ``tuner``; the count loaded. Any other key in ``source`` is ignored, but a prefix
    key or value of a layer ``tuner`` does not have (a file from a deeper model) is
    refused before anything is copied, as a shallower file is."""
    if not isinstance(tuner, PrefixTuner):
        raise TypeError(f"load_prefix_weights takes a PrefixTuner; got {type(tuner).__name__}")
    return load_owned("load_prefix_weights", tuner, tuner._owned(), source, complete=True,
                      describe="a prefix key or value", family=_PREFIX_NAMES)
