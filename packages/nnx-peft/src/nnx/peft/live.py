"""Adapters applied in place, recognised as their recipes (spec §11.1).

``apply_lora_to(model.net, ...)`` then ``model.train(...)``: nnx-core asks every
registered op that is a :class:`~nnx.extend.RecognizingTransform` which recipes
reproduce the net's in-place changes, and records them as the run's. The ``nnx.lora``,
``nnx.dora`` and ``nnx.ia3`` ops answer here with the configs of the adapters they
own (exact type: a DoRALinear is DoRA's, never LoRA's; a subclass is nobody's), so
the recipe rebuilds the same wrappers (targets, ``r``, ``alpha``, dropout, IA3's
feed-forward side). Layers with different settings give one recipe each.

The ``*_weights`` explainers read a checkpoint written before such runs recorded
their adapters: its saved names show ``<path>.base.weight`` and the adapter's own
tensors where the rebuilt net has ``<path>.weight``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from torch import nn

from nnx.peft.dora import DoRALinear
from nnx.peft.ia3 import IA3Linear
from nnx.peft.lora import LoRALinear
from nnx.peft.targeting import AdapterWrapper, Slot, adapter_slots

__all__ = ["explain_ia3_weights", "low_rank_explainer", "low_rank_recognizer",
           "recognize_ia3"]

Shapes = Mapping[str, tuple[int, ...]]


def _new_slots(net: nn.Module, reference: nn.Module, kind: type[AdapterWrapper]) -> list[Slot]:
    """The slots of ``net`` holding exactly a ``kind`` wrapper where ``reference`` (the
    built net, recorded recipes replayed) does not hold one already."""
    out = []
    for slot in adapter_slots(net, kind):
        if type(slot.module) is not kind:
            continue
        try:
            recorded = type(reference.get_submodule(slot.path)) is kind
        except AttributeError:  # not in the built net: the replay will say so
            recorded = False
        if not recorded:
            out.append(slot)
    return out


def _refuse_merged(slot: Slot) -> None:
    if getattr(slot.module, "merged", False):
        raise ValueError(
            f"the adapter at {slot.path!r} is merged into its base (merge_lora): a reload "
            f"would add the update twice; call unmerge_lora(net) to train the adapter, or "
            f"merge_lora(net, unload=True) to train the plain net")


def low_rank_recognizer(kind: type[LoRALinear]
                        ) -> Callable[[nn.Module, nn.Module], list[dict[str, Any]]]:
    """``recognize(net, reference)`` for the ``kind`` (LoRALinear or DoRALinear) op: one
    config per distinct ``(r, alpha, dropout)``, targets in canonical path order."""

    def recognize(net: nn.Module, reference: nn.Module) -> list[dict[str, Any]]:
        groups: dict[tuple[int, float, float], list[str]] = {}
        for slot in _new_slots(net, reference, kind):
            _refuse_merged(slot)
            wrapper = slot.module
            assert isinstance(wrapper, LoRALinear)
            drop = wrapper.lora_dropout
            # Any other dropout module than the two LoRALinear builds fails the tree check.
            p = float(drop.p) if isinstance(drop, nn.Dropout) else 0.0
            groups.setdefault((wrapper.r, wrapper.alpha, p), []).append(slot.path)
        return [{"targets": paths, "r": r, "alpha": alpha, "dropout": p}
                for (r, alpha, p), paths in groups.items()]

    recognize.__name__ = f"recognize_{kind.__name__}"
    return recognize


def _wrapped(missing: Sequence[str], unexpected: Shapes, own: str) -> list[str]:
    """The paths whose saved names show a wrapper holding tensor ``own``: ``<p>.<own>``
    and ``<p>.base.weight`` saved where the rebuilt net has ``<p>.weight``."""
    lacking = set(missing)
    suffix = f".{own}"
    return [key[:-len(suffix)] for key in unexpected if key.endswith(suffix)
            and f"{key[:-len(suffix)]}.base.weight" in unexpected
            and f"{key[:-len(suffix)]}.weight" in lacking]


def _call(api: str, paths: Sequence[str], extra: str) -> str:
    return f"nnx.{api}(model.net, {', '.join(map(repr, paths))}, {extra})"


def low_rank_explainer(kind: type[LoRALinear]) -> Callable[[Sequence[str], Shapes], str | None]:
    """``explain_weights`` for the ``kind`` op: the saved LoRA (DoRA: with a
    ``magnitude``) adapters, their ``r`` read from ``lora_A``'s shape."""
    dora = issubclass(kind, DoRALinear)
    name, api = ("DoRA", "dora_recipe") if dora else ("LoRA", "lora_recipe")

    def explain(missing: Sequence[str], unexpected: Shapes) -> str | None:
        by_rank: dict[int, list[str]] = {}
        for path in _wrapped(missing, unexpected, "lora_A.weight"):
            if (f"{path}.magnitude" in unexpected) == dora:
                by_rank.setdefault(unexpected[f"{path}.lora_A.weight"][0], []).append(path)
        if not by_rank:
            return None
        calls = [_call(api, paths, f"r={r}, alpha=<its alpha>, dropout=<its dropout>")
                 for r, paths in by_rank.items()]
        return f"{name} adapters, rebuilt by {' and '.join(calls)}"

    explain.__name__ = f"explain_{kind.__name__}_weights"
    return explain


def recognize_ia3(net: nn.Module, reference: nn.Module) -> list[dict[str, Any]]:
    """``recognize`` for ``nnx.ia3``: one config, feed-forward targets marked."""
    slots = _new_slots(net, reference, IA3Linear)
    if not slots:
        return []
    return [{"targets": [s.path for s in slots],
             "feedforward": [s.path for s in slots
                             if getattr(s.module, "feedforward", False)]}]


def explain_ia3_weights(missing: Sequence[str], unexpected: Shapes) -> str | None:
    """``explain_weights`` for ``nnx.ia3``: a ``scaling`` as long as the base's input
    marks a feed-forward target (undecidable for a square layer)."""
    paths = _wrapped(missing, unexpected, "scaling")
    if not paths:
        return None
    ff, unsure = [], []
    for path in paths:
        out_features, in_features = unexpected[f"{path}.base.weight"][:2]
        if in_features == out_features:
            unsure.append(path)
        elif unexpected[f"{path}.scaling"] == (in_features,):
            ff.append(path)
    note = (f" ({', '.join(map(repr, unsure))} square: list them in feedforward if their "
            f"input was scaled)" if unsure else "")
    return f"IA3 adapters, rebuilt by {_call('ia3_recipe', paths, f'feedforward={ff!r}')}{note}"
