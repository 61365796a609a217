"""The paradigm steps (KD, SimCLR, DPO) against the same step written in plain PyTorch.

    uv run python tools/bench/paradigm_steps.py [--repeats N] [--only kd,simclr,dpo]

For each paradigm, two contenders train the same net from the same initial weights
on the same seeded data, in the same ``DataLoader`` order, with the same optimizer:

* **nnx** — ``NNModel.train`` (``GenerativeNNModel.train`` for DPO) with the paradigm's
  step factory as ``train_step_fn``, as docs/paradigms.md and docs/dpo.md show;
* **plain** — the same step by hand: ``zero_grad`` → forward(s) → the paradigm's loss
  → ``backward`` → ``step``, ``loss.item()`` per step (harness.py's plain loop).

A step is the interval between two consecutive batches of one epoch, stamped by
harness.py's ``TimedLoader``, so the end-of-epoch commit is not in it; a run's value
is its median step. Rounds are interleaved (the order alternates) after an untimed
warm-up round, whose first steps' losses must agree between the two contenders
(asserted: the comparison is of the same step). Each ratio is the median over the
rounds of NNx / plain within the round, with the rounds' min–max.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from nnx import Devices, Losses, NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams
from tools.bench.harness import THREADS, Stamps, TimedLoader, machine, quiet, seed_everything

BATCH, FEATURES, CLASSES, ROWS, EPOCHS, LR = 64, 64, 10, 4096, 2, 1e-3
CHECKED_STEPS = 3  # the warm-up's first steps whose losses must agree


def _loader(dataset: Any, stamps: Stamps | None, batch_size: int = BATCH,
            **kwargs: Any) -> DataLoader[Any]:
    generator = torch.Generator().manual_seed(0)
    cls = DataLoader if stamps is None else TimedLoader
    loader = cls(dataset, batch_size=batch_size, shuffle=True, generator=generator, **kwargs)
    if stamps is not None:
        loader.stamps = stamps
    return loader


def _fit_nnx(model: Any, loader: DataLoader[Any], step_fn: Any,
             optim: NNOptimParams) -> list[float]:
    params = NNTrainParams(n_epochs=EPOCHS, train_loader=loader, seed=0, scheduler=None,
                           save_phase_checkpoints=False, optim=optim)
    with tempfile.TemporaryDirectory(prefix="nnx-bench-paradigm-") as tmp:
        run = model.train(params, train_step_fn=step_fn, root=str(Path(tmp) / "runs"),
                          verbose=False)
    return [idp.train_edp.loss for idp in run.idps]


def _mlp(hidden: tuple[int, ...], out: int = CLASSES, seed: int = 0) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=FEATURES, output_dim=out, hidden_dims=hidden),
                   params=NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))


def _tabular() -> tuple[Tensor, Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(ROWS, FEATURES, generator=g)
    w = torch.randn(FEATURES, CLASSES, generator=g)
    return x, (x @ w + 2.0 * torch.randn(ROWS, CLASSES, generator=g)).argmax(1)


# -- the paradigms --------------------------------------------------------------------------


@dataclass(frozen=True)
class Paradigm:
    key: str
    description: str
    nnx: Callable[[Stamps | None], list[float]]
    plain: Callable[[Stamps | None], list[float]]


def kd() -> Paradigm:
    """Hinton KD: a 64 → 256 → 256 → 10 student, a 64 → 512 → 512 → 10 teacher."""
    from nnx import kd_train_step_factory

    x, y = _tabular()
    data = TensorDataset(x, y)
    alpha, temperature = 0.5, 4.0
    teacher = _mlp((512, 512), seed=1)

    def nnx_run(stamps: Stamps | None) -> list[float]:
        step = kd_train_step_factory(teacher, alpha=alpha, temperature=temperature)
        return _fit_nnx(_mlp((256, 256)), _loader(data, stamps), step,
                        NNOptimParams.builder().adam(max_lr=LR).build())

    def plain_run(stamps: Stamps | None) -> list[float]:
        net, tnet = _mlp((256, 256)).net, teacher.net
        tnet.eval()
        seed_everything(0)
        optimizer = torch.optim.Adam(net.parameters(), lr=LR)
        losses: list[float] = []
        for _ in range(EPOCHS):
            net.train()
            for xb, yb in _loader(data, stamps):
                optimizer.zero_grad(set_to_none=True)
                out = net(xb)
                with torch.no_grad():
                    t = tnet(xb)
                soft = F.kl_div(F.log_softmax(out / temperature, 1),
                                F.softmax(t / temperature, 1),
                                reduction="batchmean") * temperature ** 2
                loss = alpha * soft + (1 - alpha) * F.cross_entropy(out, yb)
                torch.autograd.backward(loss)
                optimizer.step()
                losses.append(loss.item())
        return losses

    return Paradigm("kd", "kd_train_step_factory: student 64 → 256 → 256 → 10, teacher "
                    "64 → 512 → 512 → 10, batch 64, 4,096 rows, 2 epochs, Adam",
                    nnx_run, plain_run)


def simclr() -> Paradigm:
    """NT-Xent over two noisy views; an encoder 64 → 256 → 256 → 32."""
    from nnx.paradigms import simclr_train_step_factory

    x, _ = _tabular()
    g = torch.Generator().manual_seed(2)
    views = TensorDataset(x + 0.1 * torch.randn(x.shape, generator=g),
                          x + 0.1 * torch.randn(x.shape, generator=g))
    temperature = 0.5

    def nnx_run(stamps: Stamps | None) -> list[float]:
        step = simclr_train_step_factory(temperature=temperature)
        return _fit_nnx(_mlp((256, 256), out=32), _loader(views, stamps), step,
                        NNOptimParams.builder().adam(max_lr=LR).build())

    def plain_run(stamps: Stamps | None) -> list[float]:
        net = _mlp((256, 256), out=32).net
        seed_everything(0)
        optimizer = torch.optim.Adam(net.parameters(), lr=LR)
        losses: list[float] = []
        for _ in range(EPOCHS):
            net.train()
            for v1, v2 in _loader(views, stamps):
                optimizer.zero_grad(set_to_none=True)
                z = F.normalize(torch.cat([net(v1), net(v2)]), dim=1)
                n = v1.shape[0]
                logits = (z @ z.T / temperature).fill_diagonal_(float("-inf"))
                rows = torch.arange(n)
                loss = F.cross_entropy(logits, torch.cat([rows + n, rows]))
                torch.autograd.backward(loss)
                optimizer.step()
                losses.append(loss.item())
        return losses

    return Paradigm("simclr", "simclr_train_step_factory: encoder 64 → 256 → 256 → 32, "
                    "two views of batch 64, 4,096 rows, 2 epochs, Adam", nnx_run, plain_run)


def dpo() -> Paradigm:
    """DPO of a small causal LM against its frozen copy (docs/dpo.md's usage)."""
    from nnx import Nets
    from nnx.lm import GenerativeNNModel, NNTransformerParams
    from nnx.paradigms import NNPreferenceDataset, dpo_train_step_factory

    vocab, pad, beta, lr = 256, 0, 0.1, 3e-3
    g = torch.Generator().manual_seed(3)

    def ids(lo: int, hi: int) -> list[int]:
        n = int(torch.randint(lo, hi + 1, (), generator=g))
        return torch.randint(1, vocab, (n,), generator=g).tolist()

    data = NNPreferenceDataset([(ids(4, 12), ids(4, 12), ids(4, 12)) for _ in range(512)],
                               pad_id=pad, vocab_size=vocab)
    shape = NNTransformerParams(vocab_size=vocab, d_model=64, n_heads=4, n_layers=2,
                                max_seq_len=64)

    def policy() -> Any:
        torch.manual_seed(0)
        return GenerativeNNModel(net_params=shape, params=NNModelParams(net=Nets.TRANSFORMER,
                                                                        device=Devices.CPU))

    def loader(stamps: Stamps | None) -> DataLoader[Any]:
        return _loader(data, stamps, batch_size=16, collate_fn=data.collate)

    def nnx_run(stamps: Stamps | None) -> list[float]:
        model = policy()
        step = dpo_train_step_factory(copy.deepcopy(model), beta=beta, pad_id=pad)
        return _fit_nnx(model, loader(stamps), step,
                        NNOptimParams.builder().adamw(max_lr=lr).build())

    def joined(prompt: Tensor, completion: Tensor, length: int) -> tuple[Tensor, Tensor]:
        lp = (prompt != pad).sum(1, keepdim=True)
        lc = (completion != pad).sum(1, keepdim=True)
        pos = torch.arange(length).expand(prompt.shape[0], length)
        in_c = (pos >= lp) & (pos < lp + lc)
        p = prompt.gather(1, pos.clamp(max=prompt.shape[1] - 1))
        c = completion.gather(1, (pos - lp).clamp(0, completion.shape[1] - 1))
        return torch.where(pos < lp, p, torch.where(in_c, c, pad)), in_c

    def logp(logits: Tensor, ids_: Tensor, mask: Tensor) -> Tensor:
        token = F.log_softmax(logits[:, :-1], -1).gather(-1, ids_[:, 1:, None])[..., 0]
        return (token * mask[:, 1:]).sum(1)

    def plain_run(stamps: Stamps | None) -> list[float]:
        net = policy().net
        ref = copy.deepcopy(net).eval().requires_grad_(False)
        seed_everything(0)
        optimizer = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-2)
        losses: list[float] = []
        for _ in range(EPOCHS):
            net.train()
            for prompt, chosen, rejected in loader(stamps):
                optimizer.zero_grad(set_to_none=True)
                lp = (prompt != pad).sum(1)
                length = int(torch.maximum((chosen != pad).sum(1),
                                           (rejected != pad).sum(1)).add(lp).max())
                (ic, mc), (ir, mr) = joined(prompt, chosen, length), joined(
                    prompt, rejected, length)
                seq, mask = torch.cat([ic, ir]), torch.cat([mc, mr])
                policy_lp = logp(net(seq), seq, mask)
                with torch.no_grad():
                    ref_lp = logp(ref(seq), seq, mask)
                b = prompt.shape[0]
                margin = (policy_lp[:b] - ref_lp[:b]) - (policy_lp[b:] - ref_lp[b:])
                loss = -F.logsigmoid(beta * margin).mean()
                torch.autograd.backward(loss)
                optimizer.step()
                losses.append(loss.item())
        return losses

    return Paradigm("dpo", "dpo_train_step_factory: TransformerNN d_model 64, 4 heads, "
                    "2 layers, vocab 256; 512 triples of 4–12 tokens each part, batch 16, "
                    "2 epochs, AdamW", nnx_run, plain_run)


PARADIGMS: dict[str, Callable[[], Paradigm]] = {"kd": kd, "simclr": simclr, "dpo": dpo}


# -- measuring ------------------------------------------------------------------------------


def _step_s(run: Callable[[Stamps | None], list[float]]) -> float:
    stamps = Stamps()
    with quiet():
        run(stamps)
    return statistics.median(stamps.steps())


def check_same_step(p: Paradigm) -> None:
    """The two contenders' first steps compute the same loss (the warm-up round)."""
    with quiet():
        a, b = p.nnx(None), p.plain(None)
    for i, (x, y) in enumerate(zip(a[:CHECKED_STEPS], b[:CHECKED_STEPS], strict=True)):
        assert math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6), (
            f"{p.key}: step {i} loss NNx {x!r} != plain {y!r}; the twins differ")


@dataclass
class Figures:
    key: str
    description: str
    nnx: list[float]
    plain: list[float]
    load: str

    def ratios(self) -> list[float]:
        return [a / b for a, b in zip(self.nnx, self.plain, strict=True)]

    def line(self) -> str:
        r = self.ratios()
        extra = statistics.median(a - b for a, b in zip(self.nnx, self.plain, strict=True))
        return (f"| {self.key} | {statistics.median(self.nnx) * 1e3:.3f} ms | "
                f"{statistics.median(self.plain) * 1e3:.3f} ms | {statistics.median(r):.3f} | "
                f"{min(r):.3f}–{max(r):.3f} | {extra * 1e6:+.0f} µs | {self.load} |")


def measure(p: Paradigm, repeats: int) -> Figures:
    check_same_step(p)  # also the warm-up round
    nnx_s: list[float] = []
    plain_s: list[float] = []
    for r in range(repeats):
        order = [("nnx", p.nnx), ("plain", p.plain)]
        for name, run in order if r % 2 == 0 else order[::-1]:
            (nnx_s if name == "nnx" else plain_s).append(_step_s(run))
    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return Figures(p.key, p.description, nnx_s, plain_s, load)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--only", default=",".join(PARADIGMS),
                        help="comma-separated paradigms (default: kd,simclr,dpo)")
    args = parser.parse_args(argv)
    keys = [k.strip() for k in args.only.split(",") if k.strip()]
    unknown = [k for k in keys if k not in PARADIGMS]
    if unknown or args.repeats < 1:
        parser.error(f"unknown paradigm {unknown}" if unknown else "--repeats must be >= 1")
    torch.set_num_threads(THREADS)
    info = machine()
    print(f"{info['cpu']}; {info['versions']}; {info['threads'].split(' for')[0]}")
    figures = []
    for key in keys:
        p = PARADIGMS[key]()
        figures.append(measure(p, args.repeats))
        print(f"{key}: done ({args.repeats} rounds)", flush=True)
    print(f"\nPer step, medians of {args.repeats} interleaved rounds "
          "(ratio: median of the rounds' NNx / plain, with min–max)")
    print("| paradigm | NNx | plain | NNx / plain | min–max | NNx − plain | load 1/5/15 |")
    print("|---|---:|---:|---:|---|---:|---|")
    for f in figures:
        print(f.line())
    for f in figures:
        print(f"  {f.key}: {f.description}")


if __name__ == "__main__":
    main()
