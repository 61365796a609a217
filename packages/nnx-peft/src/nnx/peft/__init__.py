"""Parameter-efficient fine-tuning (spec §11): adapters that train a few new
parameters on a frozen base."""

from nnx.peft.lora import LoRALinear, apply_lora_to

__all__: list[str] = ["LoRALinear", "apply_lora_to"]
