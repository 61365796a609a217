"""An optional crossing to another add-on: nnx-peft's LoRA on the example net.

nnx-example-plugin does not require nnx-peft (it is the ``peft`` extra,
``pip install nnx-example-plugin[peft]``), so it reaches it only through
``nnx.extend.require_distribution``: the import is visible to the conformance
check, and without nnx-peft the call raises the one install hint,
``MissingDistributionError`` naming ``pip install nnx-peft``.
"""

from __future__ import annotations

from torch import nn

from nnx.extend import TransformRecipe, require_distribution

__all__ = ["example_lora_recipe"]


def example_lora_recipe(net: nn.Module, *, r: int = 2, alpha: float = 4.0) -> TransformRecipe:
    """nnx-peft's ``nnx.lora`` recipe for an ``ExampleMLP``'s ``linear`` layer."""
    peft = require_distribution("nnx-peft", "nnx.peft", needed_by="example_lora_recipe")
    recipe: TransformRecipe = peft.lora_recipe(net, "linear", r=r, alpha=alpha)
    return recipe
