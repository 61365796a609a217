"""Parameter-efficient fine-tuning (spec §11): adapters that train a few new
parameters on a frozen base.

LoRA: :class:`LoRALinear`, :func:`apply_lora_to`, the adapter files
(:func:`save_lora_weights` / :func:`load_lora_weights`; each file carries the
SHA-256 of its tensors, and a damaged one raises :class:`AdapterFileError`), merging
(:func:`merge_lora` / :func:`unmerge_lora`) and the ``nnx.lora`` v1 transform
recipe (:func:`lora_recipe`). :mod:`nnx.peft.targeting` is the slot walk every
Linear adapter shares. DoRA: :class:`DoRALinear` / :func:`apply_dora_to`; IA3:
:class:`IA3Linear`, :func:`apply_ia3_to`, :func:`save_ia3_weights` /
:func:`load_ia3_weights`; :class:`AdapterLayer`. :class:`PromptTuner` and
:class:`PrefixTuner` tune a frozen nnx-lm ``TransformerNN`` (reached through
:mod:`nnx.peft.lm_protocol`).
"""

from nnx.peft.adapter import AdapterLayer
from nnx.peft.adapter_files import AdapterFileError
from nnx.peft.dora import DoRALinear, apply_dora_to
from nnx.peft.files import load_lora_weights, lora_state_dict, save_lora_weights
from nnx.peft.ia3 import IA3Linear, apply_ia3_to, load_ia3_weights, save_ia3_weights
from nnx.peft.lora import LoRALinear, apply_lora_to
from nnx.peft.merging import merge_lora, unmerge_lora
from nnx.peft.prefix import PrefixTuner, load_prefix_weights, save_prefix_weights
from nnx.peft.prompt import PromptTuner, load_prompt_weights, save_prompt_weights
from nnx.peft.recipe import (
    dora_recipe,
    ia3_recipe,
    lora_recipe,
    materialize_dora,
    materialize_ia3,
    materialize_lora,
)

__all__: list[str] = [
    "AdapterFileError",
    "AdapterLayer",
    "DoRALinear",
    "IA3Linear",
    "LoRALinear",
    "PrefixTuner",
    "PromptTuner",
    "apply_dora_to",
    "apply_ia3_to",
    "apply_lora_to",
    "dora_recipe",
    "ia3_recipe",
    "load_ia3_weights",
    "load_lora_weights",
    "load_prefix_weights",
    "load_prompt_weights",
    "lora_recipe",
    "lora_state_dict",
    "materialize_dora",
    "materialize_ia3",
    "materialize_lora",
    "merge_lora",
    "save_ia3_weights",
    "save_lora_weights",
    "save_prefix_weights",
    "save_prompt_weights",
    "unmerge_lora",
]
