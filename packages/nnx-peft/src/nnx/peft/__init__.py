"""Parameter-efficient fine-tuning (spec §11): adapters that train a few new
parameters on a frozen base.

LoRA: :class:`LoRALinear`, :func:`apply_lora_to`, the adapter files
(:func:`save_lora_weights` / :func:`load_lora_weights`), merging
(:func:`merge_lora` / :func:`unmerge_lora`) and the ``nnx.lora`` v1 transform
recipe (:func:`lora_recipe`). :mod:`nnx.peft.targeting` is the slot walk every
Linear adapter shares. :class:`PromptTuner` and :class:`PrefixTuner` tune a
frozen nnx-lm ``TransformerNN`` (reached through :mod:`nnx.peft.lm_protocol`).
"""

from nnx.peft.files import load_lora_weights, lora_state_dict, save_lora_weights
from nnx.peft.lora import LoRALinear, apply_lora_to
from nnx.peft.merging import merge_lora, unmerge_lora
from nnx.peft.prefix import PrefixTuner, load_prefix_weights, save_prefix_weights
from nnx.peft.prompt import PromptTuner, load_prompt_weights, save_prompt_weights
from nnx.peft.recipe import lora_recipe, materialize_lora

__all__: list[str] = [
    "LoRALinear",
    "PrefixTuner",
    "PromptTuner",
    "apply_lora_to",
    "load_lora_weights",
    "load_prefix_weights",
    "load_prompt_weights",
    "lora_recipe",
    "lora_state_dict",
    "materialize_lora",
    "merge_lora",
    "save_lora_weights",
    "save_prefix_weights",
    "save_prompt_weights",
    "unmerge_lora",
]
