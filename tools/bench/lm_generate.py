"""Greedy generation speed: GenerativeNNModel with the KV cache, without it, and transformers.

Contenders, all decoding the same 256 new tokens greedily from the same prompt
on the same weights (a 4-layer, d_model 128 TransformerNN, random init):

* **cache** — ``generate(use_cache=True)``: one prefill, then one token at a
  time from the KV cache;
* **recompute** — ``generate(use_cache=False)``: the whole sequence again at
  every step (the reference the cache is tested against);
* **transformers** — ``LlamaForCausalLM.generate(do_sample=False)`` on the same
  weights written by ``nnx.lm.hf.save_llama``, when that module and
  ``transformers`` are installed (else the row says why it is absent).

Every contender runs once per repeat, interleaved, in one process; figures are
medians over repeats and ratios the median of the per-repeat ratios.

    uv run python tools/bench/lm_generate.py [--repeats N] [--threads N]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from nnx import GenerativeNNModel, Nets, NNModelParams, NNTransformerParams

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tools.bench.spread import load, ratio_text

SHAPE = NNTransformerParams(vocab_size=512, d_model=128, n_heads=4, n_layers=4, max_seq_len=512)
PROMPT_LEN = 16
NEW_TOKENS = 256


def _model() -> GenerativeNNModel:
    torch.manual_seed(0)
    return GenerativeNNModel(net_params=SHAPE, params=NNModelParams(net=Nets.TRANSFORMER))


def _transformers(model: GenerativeNNModel, prompt: list[int], directory: Path
                  ) -> tuple[Callable[[], list[int]] | None, str]:
    """A greedy ``transformers`` decode on the same weights, or None and the reason."""
    try:  # through importlib: the bench type-checks with or without nnx.lm.hf present
        hf: Any = importlib.import_module("nnx.lm.hf")
    except ImportError:
        return None, "nnx.lm.hf is not on this branch"
    try:
        from transformers import LlamaForCausalLM
    except ImportError:
        return None, "transformers is not installed"
    hf.save_llama(model.net, directory)
    llama: Any = LlamaForCausalLM.from_pretrained(directory)
    llama.eval()
    ids = torch.tensor([prompt])

    def run() -> list[int]:
        with torch.no_grad():
            out = llama.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                                 pad_token_id=0, eos_token_id=None)
        return [int(t) for t in out[0, len(prompt):]]

    return run, ""


def measure(repeats: int) -> tuple[dict[str, list[float]], dict[str, Any]]:
    model = _model()
    prompt = [int(t) for t in torch.randint(0, SHAPE.vocab_size, (PROMPT_LEN,),
                                            generator=torch.Generator().manual_seed(1))]
    runs: dict[str, Callable[[], list[int]]] = {
        "cache": lambda: model.generate(prompt, max_new_tokens=NEW_TOKENS, temperature=0),
        "recompute": lambda: model.generate(prompt, max_new_tokens=NEW_TOKENS, temperature=0,
                                            use_cache=False),
    }
    notes: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        hf_run, why = _transformers(model, prompt, Path(tmp) / "llama")
        if hf_run is None:
            notes["transformers"] = why
        else:
            runs["transformers"] = hf_run
        outputs = {name: run() for name, run in runs.items()}  # warm-up, and the tokens
        notes["same_tokens"] = {name: out == outputs["cache"] for name, out in outputs.items()}
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeats):
            for name, run in runs.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    return times, notes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: steadier on a shared machine)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    times, notes = measure(args.repeats)
    params = sum(p.numel() for p in _model().net.parameters())
    print(f"TransformerNN {SHAPE.n_layers} layers, d_model {SHAPE.d_model}, {params:,} params; "
          f"prompt {PROMPT_LEN}, {NEW_TOKENS} new tokens greedy; {args.repeats} repeats, "
          f"{args.threads} thread(s)")
    print(f"{'contender':<14}  {'median s':>9}  {'tokens/s':>9}  {'time / cached (min-max)':>24}  "
          f"{'same tokens':>11}")
    for name, series in times.items():
        median = statistics.median(series)
        print(f"{name:<14}  {median:>9.3f}  {NEW_TOKENS / median:>9.0f}  "
              f"{ratio_text(series, times['cache']):>24}  {notes['same_tokens'][name]!s:>11}")
    if "transformers" in notes:
        print(f"{'transformers':<14}  skipped: {notes['transformers']}")
    print(f"load average: {load()}")


if __name__ == "__main__":
    main()
