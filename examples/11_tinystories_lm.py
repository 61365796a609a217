"""A small language model end to end on CPU (nnx-lm, docs/lm.md): tokenizer, train, resume,
generate.

Trains a byte-level BPE tokenizer on examples/data/tiny_stories.txt (shipped, 3 KB),
trains a 2-layer TransformerNN with the causal-LM task for 2 epochs, resumes the run
for a third epoch (a stateful resume: the same weights as 3 straight epochs), then
reloads the last checkpoint into a GenerativeNNModel and generates greedily, with and
without the KV cache. Needs `pip install nnx-core nnx-lm`; runs in seconds.
"""

from __future__ import annotations

from pathlib import Path

import torch

from nnx import (
    GenerativeNNModel,
    Nets,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNTokenizerParams,
    NNTrainParams,
    NNTransformerParams,
)
from nnx.lm_tasks import CausalLMModel, CausalLMTask

TEXT = Path(__file__).with_name("data") / "tiny_stories.txt"
SEQ = 32

lines = [line for line in TEXT.read_text(encoding="utf-8").splitlines() if line.strip()]
tok = NNTokenizerParams.train(lines, vocab_size=320, path="runs/tokenizer.json")

# One long token stream cut into fixed windows: every row is SEQ + 1 ids (inputs + shift).
stream = torch.tensor([i for line in lines for i in tok.encode(line, eos=True)])
rows = stream[: len(stream) // (SEQ + 1) * (SEQ + 1)].view(-1, SEQ + 1)
train_rows, val_rows = rows[: len(rows) * 7 // 8], rows[len(rows) * 7 // 8:]

net = NNTransformerParams(vocab_size=tok.vocab_size, d_model=64, n_heads=4, n_layers=2,
                          max_seq_len=128)
task = CausalLMTask(vocab_size=tok.vocab_size, pad_id=tok.pad_id)


def plan(n_epochs: int, **resume: object) -> NNTrainParams:
    loader = torch.utils.data.DataLoader(train_rows, batch_size=8, shuffle=True,
                                         generator=torch.Generator().manual_seed(0))
    return NNTrainParams(n_epochs=n_epochs, train_loader=loader, val_loader=[val_rows],
                         optim=NNOptimParams.builder().adamw(max_lr=3e-3).build(),
                         scheduler=None, seed=0, **resume)  # type: ignore[arg-type]


def lm(seed: int) -> NNModel:
    torch.manual_seed(seed)
    return CausalLMModel(net, NNModelParams(net=Nets.TRANSFORMER), task=task)


first = lm(0).train(plan(2), verbose=False)
rest = lm(1).train(plan(1, resume_from_run_id=first.id, resume_mode="stateful"), verbose=False)
nll = rest.epoch_records()[-1].val_edp
print(f"run {first.id} (2 epochs) resumed as {rest.id}: validation NLL {nll.loss:.3f}, "
      f"perplexity {nll.metrics['perplexity']:.1f}")

model = GenerativeNNModel.from_checkpoint(NNCheckpoint.load(rest.id, "last"), tokenizer=tok)
prompt = "The lighthouse keeper"
cached = model.generate(prompt, max_new_tokens=24, temperature=0)
assert cached == model.generate(prompt, max_new_tokens=24, temperature=0, use_cache=False)
print(f"{prompt}{cached}")
print(model.generate(prompt, max_new_tokens=24, temperature=0.8, top_k=20, seed=0))
