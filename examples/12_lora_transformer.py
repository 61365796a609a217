"""LoRA on a language model (nnx-peft over nnx-lm, docs/peft.md): pretrain, adapt, reload.

Pretrains a 2-layer TransformerNN with the causal-LM task on the first half of
examples/data/tiny_stories.txt, then wraps its attention projections (`qkv`, `out`) in
LoRA through the `nnx.lora` recipe, so the run id and every checkpoint record the
adapters. Freezes everything else, fine-tunes on the second half with only lora_A /
lora_B training, and checks that every pretrained tensor is bit-exactly unchanged.
Saves the adapter alone, loads it into a fresh copy of the pretrained net, and
generates the same text from both.
Needs `pip install nnx-core nnx-lm nnx-peft`; runs in seconds.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch

from nnx import (
    GenerativeNNModel,
    Nets,
    NNModelParams,
    NNOptimParams,
    NNTokenizerParams,
    NNTrainParams,
    NNTransformerParams,
    apply_lora_to,
    load_lora_weights,
    lora_recipe,
    save_lora_weights,
)
from nnx.lm_tasks import CausalLMTask

TEXT = Path(__file__).with_name("data") / "tiny_stories.txt"
SEQ = 32
TARGETS = ("blocks.*.attn.qkv", "blocks.*.attn.out")

lines = [line for line in TEXT.read_text(encoding="utf-8").splitlines() if line.strip()]
tok = NNTokenizerParams.train(lines, vocab_size=320, path="runs/tokenizer.json")


def windows(text: list[str]) -> torch.Tensor:
    """One token stream cut into rows of SEQ + 1 ids (inputs + the shifted targets)."""
    stream = torch.tensor([i for line in text for i in tok.encode(line, eos=True)])
    return stream[: len(stream) // (SEQ + 1) * (SEQ + 1)].view(-1, SEQ + 1)


def plan(rows: torch.Tensor, n_epochs: int, lr: float) -> NNTrainParams:
    loader = torch.utils.data.DataLoader(rows, batch_size=8, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    return NNTrainParams(n_epochs=n_epochs, train_loader=loader, scheduler=None, seed=0,
                         optim=NNOptimParams.builder().adamw(max_lr=lr).build())


half = len(lines) // 2
torch.manual_seed(0)
model = GenerativeNNModel(
    NNTransformerParams(vocab_size=tok.vocab_size, d_model=64, n_heads=4, n_layers=2,
                        max_seq_len=128),
    NNModelParams(net=Nets.TRANSFORMER), tokenizer=tok,
    task=CausalLMTask(vocab_size=tok.vocab_size, pad_id=tok.pad_id))
model.train(plan(windows(lines[:half]), n_epochs=1, lr=3e-3), verbose=False)
pretrained = copy.deepcopy(model.net)

# LoRA freezes the layers it wraps; freeze the rest (embeddings, norms, feed-forward)
# first, as HF PEFT's get_peft_model does, so only lora_A / lora_B train. The recipe names
# explicit targets, so NNModel.from_checkpoint can rebuild the adapters.
model.freeze("*")
recipe = lora_recipe(model.net, *TARGETS, r=4, alpha=8.0)
model.apply_transform(recipe)
before = {name: t.detach().clone() for name, t in pretrained.state_dict().items()}
run = model.train(plan(windows(lines[half:]), n_epochs=1, lr=1e-2), verbose=False)

after = {name.replace(".base.", "."): t for name, t in model.net.state_dict().items()
         if "lora_" not in name}
assert after.keys() == before.keys()
assert all(torch.equal(after[name], before[name]) for name in before), "a base tensor moved"

save_lora_weights(model.net, "runs/lora_adapter.pt")
adapter = Path("runs/lora_adapter.pt").stat().st_size
full = sum(t.numel() * t.element_size() for t in model.net.state_dict().values())
print(f"run {run.id}: {len(recipe.config['targets'])} LoRA layers; adapter file "
      f"{adapter / 1024:.1f} KiB, {adapter / full:.1%} of the full state")

fresh = copy.deepcopy(model)  # same config and tokenizer; swap in the plain pretrained net
fresh.net = pretrained
apply_lora_to(fresh.net, *TARGETS, r=4, alpha=8.0)
load_lora_weights(fresh.net, "runs/lora_adapter.pt")
prompt = "The lighthouse keeper"
text = model.generate(prompt, max_new_tokens=24, temperature=0)
assert fresh.generate(prompt, max_new_tokens=24, temperature=0) == text
print(f"{prompt}{text}")
