"""LoRA on a language model (nnx-peft over nnx-lm, docs/peft.md): pretrain, adapt, reload.

Pretrains a 2-layer TransformerNN with the causal-LM task on
examples/data/tiny_stories.txt (each line one right-padded row), then wraps its
attention projections (`qkv`, `out`) in LoRA through the `nnx.lora` recipe, so the run
id and every checkpoint record the adapters. Freezes everything else, adapts to the
story's second half with only lora_A / lora_B training (its NLL there drops), and
checks that every pretrained tensor is bit-exactly unchanged. (The base sees the whole
story: a frozen embedding never learns a token it was not pretrained on.) Saves the
adapter alone, loads it into a fresh copy of the pretrained net, and generates the same
text from both: greedily, and by sampling with top-p and a repetition penalty.

Everything is written to a temporary directory, so the script runs again and again in
the same place. Needs `pip install nnx-core nnx-lm nnx-peft`; runs in seconds.
"""

from __future__ import annotations

import copy
import tempfile
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
TARGETS = ("blocks.*.attn.qkv", "blocks.*.attn.out")
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


def plan(batches: list[dict[str, torch.Tensor]], n_epochs: int, lr: float) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=batches, scheduler=None, seed=0,
                         optim=NNOptimParams.builder().adamw(max_lr=lr).build())


def main(root: str) -> None:
    tok = NNTokenizerParams.train(lines, vocab_size=600, path=f"{root}/tokenizer.json")
    half = len(lines) // 2
    torch.manual_seed(0)
    model = GenerativeNNModel(
        NNTransformerParams(vocab_size=tok.vocab_size, d_model=64, n_heads=4, n_layers=2,
                            max_seq_len=128),
        NNModelParams(net=Nets.TRANSFORMER), tokenizer=tok,
        task=CausalLMTask(vocab_size=tok.vocab_size, pad_id=tok.pad_id))
    model.train(plan(padded(tok, lines), n_epochs=30, lr=5e-3), verbose=False, root=root)
    pretrained = copy.deepcopy(model.net)
    second = padded(tok, lines[half:])
    assert isinstance(model.task, CausalLMTask)
    nll_before = model.task.evaluate(model, second).loss

    # LoRA freezes the layers it wraps; freeze the rest (embeddings, norms, feed-forward)
    # first, as HF PEFT's get_peft_model does, so only lora_A / lora_B train. The recipe
    # names explicit targets, so NNModel.from_checkpoint can rebuild the adapters.
    model.freeze("*")
    recipe = lora_recipe(model.net, *TARGETS, r=4, alpha=8.0)
    model.apply_transform(recipe)
    before = {name: t.detach().clone() for name, t in pretrained.state_dict().items()}
    run = model.train(plan(second, n_epochs=10, lr=1e-2), verbose=False, root=root)
    nll_after = model.task.evaluate(model, second).loss
    assert nll_before is not None and nll_after is not None and nll_after < nll_before

    after = {name.replace(".base.", "."): t for name, t in model.net.state_dict().items()
             if "lora_" not in name}
    assert after.keys() == before.keys()
    assert all(torch.equal(after[name], before[name]) for name in before), "a base tensor moved"

    adapter_path = Path(root) / "lora_adapter.pt"
    save_lora_weights(model.net, adapter_path)
    adapter = adapter_path.stat().st_size
    full = sum(t.numel() * t.element_size() for t in model.net.state_dict().values())
    print(f"run {run.id}: {len(recipe.config['targets'])} LoRA layers; adapter file "
          f"{adapter / 1024:.1f} KiB, {adapter / full:.1%} of the full state; second-half "
          f"NLL {nll_before:.3f} -> {nll_after:.3f}")

    fresh = copy.deepcopy(model)  # same config and tokenizer; swap in the plain pretrained net
    fresh.net = pretrained
    apply_lora_to(fresh.net, *TARGETS, r=4, alpha=8.0)
    load_lora_weights(fresh.net, adapter_path)
    for prompt in ("The girl", "The dog"):
        text = model.generate(prompt, max_new_tokens=40, temperature=0)
        assert fresh.generate(prompt, max_new_tokens=40, temperature=0) == text
        print(f"greedy:  {prompt}{text}")
        sampled = model.generate(prompt, max_new_tokens=40, temperature=0.5, top_p=0.8,
                                 repetition_penalty=1.1, seed=0)
        assert fresh.generate(prompt, max_new_tokens=40, temperature=0.5, top_p=0.8,
                              repetition_penalty=1.1, seed=0) == sampled
        print(f"sampled: {prompt}{sampled}")


if __name__ == "__main__":
    torch.set_num_threads(1)  # a net this small gains nothing from intra-op threads
    with tempfile.TemporaryDirectory() as tmp:
        main(tmp)
