"""Parameter-efficient fine-tuning (spec §11): adapters that train a few new
parameters on a frozen base."""

from nnx.peft.prefix import PrefixTuner, load_prefix_weights, save_prefix_weights
from nnx.peft.prompt import PromptTuner, load_prompt_weights, save_prompt_weights

__all__: list[str] = [
    "PrefixTuner",
    "PromptTuner",
    "load_prefix_weights",
    "load_prompt_weights",
    "save_prefix_weights",
    "save_prompt_weights",
]
