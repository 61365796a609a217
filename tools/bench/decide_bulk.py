"""``FixedHeadProvider.decide`` over many rows against a plain softmax + argmax + threshold.

Contenders, on the same seeded rows and the same small categorical net (16 → 16 → 10 by
default, ``--hidden`` to widen it; untrained: the answers' values do not matter, their
cost does), in one process, one thread. The net is small on purpose: the forward both
contenders run is then a small part of the plain side, so the ratio shows what
``decide`` adds.

* **plain** — what one writes by hand: the net in eval mode, ``torch.no_grad()``, the
  forward, ``softmax``, ``max`` over the classes and ``>= 0.5`` on the top probability;
* **decide** — ``FixedHeadProvider(model, labels=...).decide(choice, x)``: the capability
  check, ``predict_proba``'s forward (modes restored), the float64 softmax, the batch's
  validation and the results (since issue 38 a lazy ``DecisionResults``: no row is
  built until read);
* **decide + read** — the same, then every row read (``tuple(results)``): what a caller
  that touches every typed result pays. Reported separately.

Rounds interleave the contenders (the order alternates) after an untimed warm-up; the
figures are the median per-round ratios to plain with their min–max (``spread.py``).

    uv run python tools/bench/decide_bulk.py [--rows N] [--hidden N] [--repeats N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import nnx
from nnx.decisions import Choice, FixedHeadProvider, Option
from tools.bench.spread import load, ratio_text

CLASSES = 10
FEATURES = 16
LABELS = tuple(f"class{i}" for i in range(CLASSES))
THRESHOLD = 0.5


def setup(rows: int, hidden: int) -> dict[str, Callable[[], Any]]:
    torch.manual_seed(0)
    net = nnx.NNParams(input_dim=FEATURES, output_dim=CLASSES, hidden_dims=(hidden,))
    model = nnx.NNModel(net, nnx.NNModelParams(device=nnx.Devices.CPU))
    x = torch.randn(rows, FEATURES, generator=torch.Generator().manual_seed(1))
    question = Choice("Which class?", tuple(Option(label, f"Class {label}") for label in LABELS))
    provider = FixedHeadProvider(model, labels=LABELS)
    module = model.net

    def plain() -> Any:
        module.eval()
        with torch.no_grad():
            top, index = torch.softmax(module(x), dim=1).max(dim=1)
            return index, top >= THRESHOLD

    def decide() -> Any:
        return provider.decide(question, x)

    def decide_and_read() -> Any:
        return tuple(provider.decide(question, x))

    return {"plain": plain, "decide": decide, "decide + read": decide_and_read}


def timed(contender: Callable[[], Any]) -> float:
    started = time.perf_counter()
    contender()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--hidden", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args()
    torch.set_num_threads(1)
    contenders = setup(args.rows, args.hidden)
    for contender in contenders.values():  # warm-up, untimed
        contender()
    times: dict[str, list[float]] = {name: [] for name in contenders}
    names = list(contenders)
    for round_ in range(args.repeats):
        for name in names if round_ % 2 == 0 else names[::-1]:
            times[name].append(timed(contenders[name]))
    print(f"decide over {args.rows:,} rows, net {FEATURES} -> {args.hidden} -> {CLASSES}, "
          f"medians of {args.repeats} interleaved rounds")
    for name, seconds in times.items():
        median = statistics.median(seconds)
        print(f"  {name:14s} {median * 1e3:9.2f} ms  {median / args.rows * 1e6:7.3f} µs a row")
    for name in names[1:]:
        print(f"  {name} / plain: {ratio_text(times[name], times['plain'])}")
    print(f"  load average: {load()}")


if __name__ == "__main__":
    main()
