"""Parameter-efficient fine-tuning (spec §11): adapters that train a few new
parameters on a frozen base."""

from nnx.peft.adapter import AdapterLayer
from nnx.peft.dora import DoRALinear, apply_dora_to
from nnx.peft.ia3 import IA3Linear, apply_ia3_to, load_ia3_weights, save_ia3_weights
from nnx.peft.lora import LoRALinear, apply_lora_to

__all__ = [
    "AdapterLayer",
    "DoRALinear",
    "IA3Linear",
    "LoRALinear",
    "apply_dora_to",
    "apply_ia3_to",
    "apply_lora_to",
    "load_ia3_weights",
    "save_ia3_weights",
]
