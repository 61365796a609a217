"""A small language model end to end on CPU (nnx-lm, docs/lm.md): tokenizer, train, resume,
generate.

Trains a byte-level BPE tokenizer on examples/data/tiny_stories.txt (shipped, 3 KB),
then a 2-layer TransformerNN with the causal-LM task: each line of the story is one
row, right-padded with the tokenizer's pad id under an attention mask. It trains for
30 epochs, resumes the run for 10 more (a stateful resume: the same weights as 40
straight epochs), reloads the last checkpoint into a GenerativeNNModel and generates
greedily (with and without the KV cache) and by sampling with top-p and a repetition
penalty. 3 KB is far too little to learn English: the model memorises the story, and
the held-out lines' perplexity says so, but what it generates reads like the story.

Everything is written to a temporary directory, so the script runs again and again
in the same place. Needs `pip install nnx-core nnx-lm`; runs in seconds.
"""

from __future__ import annotations

import tempfile
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
lines = [line for line in TEXT.read_text(encoding="utf-8").splitlines() if line.strip()]


def padded(tok: NNTokenizerParams, text: list[str]) -> list[dict[str, torch.Tensor]]:
    """Batches of 8 lines, each line one row ending in eos, right-padded and masked."""
    batches = []
    for i in range(0, len(text), 8):
        ids = [tok.encode(line, eos=True) for line in text[i:i + 8]]
        width = max(map(len, ids))
        assert tok.pad_id is not None  # NNTokenizerParams.train adds <pad>
        rows = torch.full((len(ids), width), tok.pad_id)
        mask = torch.zeros(len(ids), width, dtype=torch.long)
        for row, seq in enumerate(ids):
            rows[row, :len(seq)], mask[row, :len(seq)] = torch.tensor(seq), 1
        batches.append({"input_ids": rows, "attention_mask": mask})
    return batches


def main(root: str) -> None:
    tok = NNTokenizerParams.train(lines, vocab_size=600, path=f"{root}/tokenizer.json")
    train, held_out = padded(tok, lines[:-3]), padded(tok, lines[-3:])
    net = NNTransformerParams(vocab_size=tok.vocab_size, d_model=64, n_heads=4, n_layers=2,
                              max_seq_len=128)
    task = CausalLMTask(vocab_size=tok.vocab_size, pad_id=tok.pad_id)

    def plan(n_epochs: int, **resume: object) -> NNTrainParams:
        return NNTrainParams(n_epochs=n_epochs, train_loader=train, val_loader=held_out,
                             optim=NNOptimParams.builder().adamw(max_lr=5e-3).build(),
                             scheduler=None, seed=0, **resume)  # type: ignore[arg-type]

    def lm(seed: int) -> NNModel:
        torch.manual_seed(seed)
        return CausalLMModel(net, NNModelParams(net=Nets.TRANSFORMER), task=task)

    first = lm(0).train(plan(30), verbose=False, root=root)
    rest = lm(1).train(plan(10, resume_from_run_id=first.id, resume_mode="stateful"),
                       verbose=False, root=root)
    last = rest.epoch_records()[-1]
    assert last.train_edp is not None and last.val_edp is not None
    print(f"run {first.id} (30 epochs) resumed as {rest.id}: training NLL "
          f"{last.train_edp.loss:.3f}; held-out perplexity "
          f"{last.val_edp.metrics['perplexity']:.0f} (memorised, not learned)")

    model = GenerativeNNModel.from_checkpoint(NNCheckpoint.load(rest.id, "last", root=root),
                                              tokenizer=tok)
    for prompt in ("The keeper", "The girl"):
        greedy = model.generate(prompt, max_new_tokens=40, temperature=0)
        assert greedy == model.generate(prompt, max_new_tokens=40, temperature=0,
                                        use_cache=False)  # the KV cache changes no token
        print(f"greedy:  {prompt}{greedy}")
        for seed in (0, 1):
            sampled = model.generate(prompt, max_new_tokens=40, temperature=0.5, top_p=0.8,
                                     repetition_penalty=1.1, seed=seed)
            print(f"sampled: {prompt}{sampled}")


if __name__ == "__main__":
    torch.set_num_threads(1)  # a net this small gains nothing from intra-op threads
    with tempfile.TemporaryDirectory() as tmp:
        main(tmp)
