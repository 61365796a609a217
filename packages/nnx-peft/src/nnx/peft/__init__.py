"""Parameter-efficient fine-tuning (spec §11): adapters that train a few new
parameters on a frozen base."""

from nnx.peft.adapter import AdapterLayer
from nnx.peft.ia3 import IA3Linear
from nnx.peft.lora import LoRALinear, apply_lora_to

__all__ = ["AdapterLayer", "IA3Linear", "LoRALinear", "apply_lora_to"]
