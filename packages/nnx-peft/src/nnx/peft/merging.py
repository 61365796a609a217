"""Merging LoRA into the base weights (spec §11.1; HF PEFT's merge / unmerge / unload).

``merge_lora`` folds each wrapper's update into its base weight through the
wrapper's own :meth:`~nnx.peft.LoRALinear.merge` (DoRA overrides it), so a
served model pays no adapter overhead. With ``unload=True`` every wrapper is
then replaced by its base Linear: the net is the plain architecture again and
its ``state_dict()`` loads into a fresh plain net under ``strict=True``.
Without it the wrappers stay, marked merged, until :func:`unmerge_lora`.
"""

from __future__ import annotations

from torch import nn

from nnx.peft.lora import LoRALinear
from nnx.peft.targeting import adapter_slots

__all__ = ["merge_lora", "unmerge_lora"]


def _wrappers(module: nn.Module) -> list[LoRALinear]:
    # module.modules() deduplicates: a wrapper reached by several paths merges once.
    return [m for m in module.modules() if isinstance(m, LoRALinear)]


def merge_lora(module: nn.Module, *, unload: bool = False) -> int:
    """Fold ``(alpha / r) · B · A`` into every LoRALinear's base weight; the number of
    wrappers newly merged (already-merged ones count 0).

    ``unload=True`` also puts each base Linear back in its wrapper's slot
    (every alias slot included). The bases stay frozen, as in HF PEFT's
    ``merge_and_unload``; ``nnx.finetune.unfreeze`` reverses that. ValueError,
    before anything changes, if ``module`` is itself a wrapper (it has no slot
    to unload into) or holds no LoRALinear.
    """
    wrappers = _wrappers(module)
    if not wrappers:
        raise ValueError("merge_lora: the module holds no LoRALinear")
    if unload and isinstance(module, LoRALinear):
        raise ValueError("merge_lora(unload=True): the module is itself a LoRALinear; unload "
                         "from its parent, or use module.merge() and module.base")
    slots = adapter_slots(module, LoRALinear) if unload else []
    merged = sum(w.merge() for w in wrappers)
    for slot in slots:
        assert isinstance(slot.module, LoRALinear)
        setattr(slot.parent, slot.attribute, slot.module.base)
    return merged


def unmerge_lora(module: nn.Module) -> int:
    """Subtract every merged wrapper's update back out of its base weight; the number
    of wrappers unmerged. The adapters' ``requires_grad`` flags return to what
    they were before the merge."""
    wrappers = _wrappers(module)
    if not wrappers:
        raise ValueError("unmerge_lora: the module holds no LoRALinear (an unloaded merge "
                         "cannot be undone)")
    return sum(w.unmerge() for w in wrappers)
