"""nnx.lm_tasks: the causal-LM task (spec §15, docs/lm.md §6)."""

from nnx.lm_tasks.causal import ALIGNMENTS, CausalLMObjective, CausalLMTask
from nnx.lm_tasks.model import CausalLMModel

__all__ = ["ALIGNMENTS", "CausalLMModel", "CausalLMObjective", "CausalLMTask"]
