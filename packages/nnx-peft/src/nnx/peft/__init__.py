"""Parameter-efficient fine-tuning (spec §11): adapters that train a few new
parameters on a frozen base.

LoRA: :class:`LoRALinear`, :func:`apply_lora_to`, the adapter files
(:func:`save_lora_weights` / :func:`load_lora_weights`), merging
(:func:`merge_lora` / :func:`unmerge_lora`) and the ``nnx.lora`` v1 transform
recipe (:func:`lora_recipe`). :mod:`nnx.peft.targeting` is the slot walk every
Linear adapter shares.
"""

from nnx.peft.files import load_lora_weights, lora_state_dict, save_lora_weights
from nnx.peft.lora import LoRALinear, apply_lora_to
from nnx.peft.merging import merge_lora, unmerge_lora
from nnx.peft.recipe import lora_recipe, materialize_lora

__all__: list[str] = [
    "LoRALinear",
    "apply_lora_to",
    "load_lora_weights",
    "lora_recipe",
    "lora_state_dict",
    "materialize_lora",
    "merge_lora",
    "save_lora_weights",
    "unmerge_lora",
]
