"""The side-by-side harness: one workload, three contenders, one process, interleaved.

A scenario script (``mlp.py``, ``mlp_val.py``, ``conv.py``) describes a
:class:`Workload`; :func:`measure` trains it with

* **plain** — a hand-written PyTorch loop: ``zero_grad`` → forward → loss →
  ``backward`` → ``step`` and ``loss.item()`` per batch, validation when the
  workload has it, and one ``torch.save`` of weights + optimizer per epoch
  (plus ``best.pt`` when the validation loss improves);
* **nnx** — ``NNModel.train`` with the default step (its per-batch record,
  history and per-epoch commit: LAST, BEST and the runs/best election);
* **lightning** — a ``LightningModule`` around the same net, ``self.log`` of the
  loss per step and per epoch into a ``CSVLogger`` (every step), and a
  ``ModelCheckpoint`` writing the last and the best checkpoint each epoch;

on the same data, the same initial weights, the same Adam, the same seeds,
the same ``DataLoader`` (shuffled by an identically seeded generator) and the
same epoch count, with ``torch.set_num_threads(1)`` for all three and no
progress bars. Repeats are interleaved (the contenders' order rotates each
repeat) after one untimed warm-up round.

What is measured, identically for all three:

* **per step** — the loader is a ``DataLoader`` subclass that stamps the time
  each batch is handed out; a step is the interval between two consecutive
  batches of one epoch (data loading + the contender's whole per-batch work).
  The run's value is the median interval;
* **per epoch** — the interval between two consecutive epochs' first
  ``iter()`` of the training loader (training, validation and the commit);
  the last epoch ends when ``fit`` returns. The run's value is the median;
* **epoch commit** — the contender's end-of-epoch persistence, timed where it
  happens: ``FitLoop.commit`` for NNx, ``ModelCheckpoint``'s epoch-end hooks
  for Lightning, the ``torch.save`` calls for the plain loop. Median per run;
* **peak RSS** — the process's resident set, sampled every 5 ms by a thread
  while the run trains (all three share the process, so this is the peak of
  the whole process during that contender's runs).

Each contender's figure is the median over the repeats of the per-run medians.
Each ratio is the median over the repeats of the ratio within a repeat (its
contenders ran back to back), so the drift of a shared machine from one
repeat to the next cancels instead of favouring whichever contender it hit.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import itertools
import logging
import math
import os
import platform
import random
import statistics
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from nnx import NNModel, NNOptimParams, NNTrainParams

CONTENDERS = ("plain", "nnx", "lightning")
THREADS = 1


@dataclass(frozen=True)
class Workload:
    """One scenario: data, a factory for the (seeded) NNx model, batch size, epochs."""

    key: str
    title: str
    description: str
    x_train: Tensor
    y_train: Tensor
    make_model: Callable[[], NNModel]
    x_val: Tensor | None = None
    y_val: Tensor | None = None
    batch_size: int = 256
    epochs: int = 5
    lr: float = 1e-3
    seed: int = 0

    def train_loader(self, stamps: Stamps | None) -> DataLoader[tuple[Tensor, ...]]:
        generator = torch.Generator().manual_seed(self.seed)
        dataset = TensorDataset(self.x_train, self.y_train)
        if stamps is None:
            return DataLoader(dataset, batch_size=self.batch_size, shuffle=True,
                              generator=generator)
        loader = TimedLoader(dataset, batch_size=self.batch_size, shuffle=True,
                             generator=generator)
        loader.stamps = stamps
        return loader

    def val_loader(self) -> DataLoader[tuple[Tensor, ...]] | None:
        if self.x_val is None or self.y_val is None:
            return None
        return DataLoader(TensorDataset(self.x_val, self.y_val), batch_size=self.batch_size)


# -- instrumentation ------------------------------------------------------------------------


@dataclass
class Stamps:
    """When each epoch's iteration began and each batch was handed out."""

    epoch_starts: list[float] = field(default_factory=list)
    batches: list[list[float]] = field(default_factory=list)
    commits: list[float] = field(default_factory=list)
    end: float = math.nan

    def steps(self) -> list[float]:
        return [b - a for epoch in self.batches for a, b in itertools.pairwise(epoch)]

    def epochs(self) -> list[float]:
        bounds = [*self.epoch_starts, self.end]
        return [b - a for a, b in itertools.pairwise(bounds)]


class TimedLoader(DataLoader[tuple[Tensor, ...]]):
    """A DataLoader that stamps each ``iter()`` and each batch it hands out."""

    stamps: Stamps

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:  # type: ignore[override]
        return self._timed(super().__iter__())

    def _timed(self, batches: Iterator[tuple[Tensor, ...]]) -> Iterator[tuple[Tensor, ...]]:
        stamps = self.stamps
        stamps.epoch_starts.append(time.perf_counter())
        handed: list[float] = []
        stamps.batches.append(handed)
        for batch in batches:
            handed.append(time.perf_counter())
            yield batch


class RssSampler:
    """The process's peak resident set while the ``with`` block runs (5 ms samples)."""

    def __init__(self, interval: float = 0.005) -> None:
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def current() -> int:
        try:
            with open("/proc/self/statm", "rb") as f:
                return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:  # not Linux: the process's peak so far
            import resource

            return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self.current())

    def __enter__(self) -> RssSampler:
        self.peak = self.current()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.current())


@contextlib.contextmanager
def timed_method(owner: type, name: str, sink: list[float]) -> Iterator[None]:
    """Time every call of ``owner.name`` into ``sink`` while the block runs."""
    original = getattr(owner, name)

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(self, *args, **kwargs)
        finally:
            sink.append(time.perf_counter() - start)

    setattr(owner, name, timed)
    try:
        yield
    finally:
        setattr(owner, name, original)


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


# -- the contenders ------------------------------------------------------------------------


@dataclass
class Result:
    """One contender's run."""

    step_s: float
    epoch_s: float
    commit_s: float
    peak_rss: int
    check_loss: float  # the trained net's loss on the first training rows (same for all)


def _check_loss(net: nn.Module, work: Workload) -> float:
    was = net.training
    net.eval()
    with torch.no_grad():
        rows = slice(0, 4096)
        loss = float(F.cross_entropy(net(work.x_train[rows]), work.y_train[rows]))
    net.train(was)
    return loss


def run_plain(work: Workload, directory: Path, stamps: Stamps,
              save: Callable[[Any, Path], Any] = torch.save) -> nn.Module:
    """The hand-written loop; ``save`` persists LAST / BEST (whole_fit.py passes the
    careful torch.save + fsync + rename)."""
    net = work.make_model().net
    seed_everything(work.seed)
    optimizer = torch.optim.Adam(net.parameters(), lr=work.lr)
    loss_fn = nn.CrossEntropyLoss()
    loader, val = work.train_loader(stamps), work.val_loader()
    best = math.inf
    history: list[float] = []  # the per-step record a hand-written loop keeps
    for epoch in range(work.epochs):
        net.train()
        for x, y in loader:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(net(x), y)
            loss.backward()
            optimizer.step()
            history.append(loss.item())
        score = history[-1]
        if val is not None:
            net.eval()
            total, correct, count = 0.0, 0, 0
            with torch.no_grad():
                for x, y in val:
                    out = net(x)
                    total += float(F.cross_entropy(out, y, reduction="sum"))
                    correct += int((out.argmax(1) == y).sum())
                    count += len(y)
            score = total / count
        start = time.perf_counter()
        state = {"epoch": epoch, "model": net.state_dict(), "optimizer": optimizer.state_dict()}
        save(state, directory / "last.pt")
        if val is not None and score < best:
            best = score
            save(state, directory / "best.pt")
        stamps.commits.append(time.perf_counter() - start)
    return net


def run_nnx(work: Workload, directory: Path, stamps: Stamps) -> nn.Module:
    from nnx._engine.fit_loop import FitLoop

    model = work.make_model()
    params = NNTrainParams(
        n_epochs=work.epochs, train_loader=work.train_loader(stamps),
        val_loader=work.val_loader(), seed=work.seed, scheduler=None,
        save_phase_checkpoints=False,
        optim=NNOptimParams.builder().adam(max_lr=work.lr).build())
    with timed_method(FitLoop, "commit", stamps.commits):
        model.train(params, root=directory / "runs", verbose=False)
    return model.net


def run_lightning(work: Workload, directory: Path, stamps: Stamps) -> nn.Module:
    import lightning as L
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger

    net = work.make_model().net
    module = _lightning_module(L.LightningModule, net, work.lr)
    has_val = work.x_val is not None
    per_epoch: dict[int, float] = {}
    checkpoint = _timed_checkpoint(ModelCheckpoint, per_epoch)(
        dirpath=directory / "checkpoints", save_last=True, save_top_k=1,
        monitor="val_loss" if has_val else "train_loss_epoch", mode="min")
    trainer = L.Trainer(
        max_epochs=work.epochs, accelerator="cpu", devices=1, default_root_dir=directory,
        logger=CSVLogger(directory, name="lightning"), log_every_n_steps=1,
        callbacks=[checkpoint], enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, deterministic=False)
    seed_everything(work.seed)
    trainer.fit(module, train_dataloaders=work.train_loader(stamps),
                val_dataloaders=work.val_loader())
    stamps.commits.extend(per_epoch.values())
    return net


def _lightning_module(base: Any, net: nn.Module, lr: float) -> Any:
    """A LightningModule training ``net`` with cross-entropy and Adam (built on ``base``
    here, so the module needs lightning only when the contender runs)."""

    def training_step(self: Any, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss: Tensor = self.loss_fn(self.net(x), y)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def validation_step(self: Any, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        out = self.net(x)
        self.log("val_loss", self.loss_fn(out, y), on_epoch=True)
        self.log("val_acc", (out.argmax(1) == y).float().mean(), on_epoch=True)

    def configure_optimizers(self: Any) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=lr)

    def init(self: Any) -> None:
        base.__init__(self)
        self.net = net
        self.loss_fn = nn.CrossEntropyLoss()

    cls = type("BenchModule", (base,), {
        "__init__": init, "training_step": training_step,
        "validation_step": validation_step, "configure_optimizers": configure_optimizers})
    return cls()


def _timed_checkpoint(base: Any, per_epoch: dict[int, float]) -> Any:
    """ModelCheckpoint with its epoch-end hooks (where it saves) timed, summed per epoch."""

    def timed(name: str) -> Callable[..., None]:
        def hook(self: Any, trainer: Any, module: Any) -> None:
            start = time.perf_counter()
            getattr(base, name)(self, trainer, module)
            epoch = int(trainer.current_epoch)
            per_epoch[epoch] = per_epoch.get(epoch, 0.0) + time.perf_counter() - start

        return hook

    return type("TimedModelCheckpoint", (base,), {
        "on_train_epoch_end": timed("on_train_epoch_end"),
        "on_validation_end": timed("on_validation_end")})


RUNNERS: dict[str, Callable[[Workload, Path, Stamps], nn.Module]] = {
    "plain": run_plain, "nnx": run_nnx, "lightning": run_lightning}


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Keep the contenders' own prints, warnings and log lines out of the table."""
    loggers = [logging.getLogger(n) for n in ("lightning", "lightning.pytorch",
                                              "lightning.fabric", "pytorch_lightning")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
                contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def run_once(work: Workload, contender: str) -> Result:
    stamps = Stamps()
    with tempfile.TemporaryDirectory(prefix=f"nnx-bench-{contender}-") as tmp, quiet(), \
            RssSampler() as rss:
        net = RUNNERS[contender](work, Path(tmp), stamps)
        stamps.end = time.perf_counter()
    return Result(step_s=statistics.median(stamps.steps()),
                  epoch_s=statistics.median(stamps.epochs()),
                  commit_s=statistics.median(stamps.commits) if stamps.commits else math.nan,
                  peak_rss=rss.peak, check_loss=_check_loss(net, work))


@dataclass
class Summary:
    """Medians over the repeats, per contender."""

    work: Workload
    repeats: int
    runs: dict[str, list[Result]]

    def median(self, contender: str, name: str) -> float:
        return float(statistics.median(getattr(r, name) for r in self.runs[contender]))

    def _paired(self, name: str, other: str) -> list[tuple[float, float]]:
        """(NNx, ``other``) of each round: the two ran back to back."""
        return [(getattr(a, name), getattr(b, name))
                for a, b in zip(self.runs["nnx"], self.runs[other], strict=True)]

    def ratio(self, name: str, other: str) -> float:
        """The median over the rounds of NNx / ``other`` within the round, so the drift of
        a shared machine between rounds cancels instead of landing on one contender."""
        return float(statistics.median(a / b for a, b in self._paired(name, other)))

    def spread(self, name: str, other: str) -> tuple[float, float]:
        """The lowest and highest per-round ratio NNx / ``other``: how far one round's
        figure can be from the median on this machine."""
        ratios = [a / b for a, b in self._paired(name, other)]
        return min(ratios), max(ratios)

    def difference(self, name: str, other: str) -> float:
        """The median over the rounds of NNx − ``other`` within the round."""
        return float(statistics.median(a - b for a, b in self._paired(name, other)))


def measure(work: Workload, repeats: int, *, contenders: Sequence[str] = CONTENDERS,
            progress: Callable[[str], None] | None = None) -> Summary:
    """Warm up once, then ``repeats`` interleaved rounds (the order rotates each round)."""
    if "lightning" in contenders and importlib.util.find_spec("lightning") is None:
        raise SystemExit("Lightning is not installed: it comes with the bench dependency "
                         "group, so run the benchmarks with `uv run --group bench python "
                         "tools/bench/<script>.py`")
    torch.set_num_threads(THREADS)
    runs: dict[str, list[Result]] = {c: [] for c in contenders}
    order = list(contenders)
    for contender in order:  # warm-up: imports, allocator, first-call paths
        run_once(work, contender)
    for r in range(repeats):
        rotated = order[r % len(order):] + order[:r % len(order)]
        for contender in rotated:
            runs[contender].append(run_once(work, contender))
        if progress is not None:
            progress(f"{work.key}: repeat {r + 1}/{repeats}")
    return Summary(work, repeats, runs)


# -- reporting ------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return "–" if math.isnan(seconds) else f"{seconds * 1e3:.2f} ms"


def _mib(size: float) -> str:
    return f"{size / 2**20:.0f} MiB"


def table(summary: Summary) -> str:
    """A Markdown table: one row per figure, one column per contender, then the ratios."""
    have = [c for c in CONTENDERS if c in summary.runs]
    names = {"plain": "plain PyTorch", "nnx": "NNx", "lightning": "Lightning"}
    head = "| | " + " | ".join(names[c] for c in have)
    rule = "|---|" + "---:|" * len(have)
    ratios = [c for c in ("plain", "lightning") if c in have and "nnx" in have]
    head += "".join(f" | NNx / {names[c]}" for c in ratios) + " |"
    rule += "---:|" * len(ratios)
    rows = [head, rule]
    for label, name, fmt in (("per step", "step_s", _ms), ("per epoch", "epoch_s", _ms),
                             ("epoch commit", "commit_s", _ms),
                             ("peak RSS", "peak_rss", _mib)):
        cells = [fmt(summary.median(c, name)) for c in have]
        cells += [_ratio_cell(summary, name, c) for c in ratios]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    cells = [f"{summary.median(c, 'check_loss'):.4f}" for c in have]
    rows.append("| trained loss (check) | " + " | ".join(cells) + " |" + " |" * len(ratios))
    return "\n".join(rows)


def _ratio_cell(summary: Summary, name: str, other: str) -> str:
    """The median ratio with the rounds' min–max beside it."""
    low, high = summary.spread(name, other)
    return f"{summary.ratio(name, other):.3f} ({low:.2f}–{high:.2f})"


def overhead_line(summary: Summary) -> str:
    if "nnx" not in summary.runs or "plain" not in summary.runs:
        return ""
    extra = summary.difference("step_s", "plain") * 1e6
    return f"NNx − plain per step (median of the rounds' differences): {extra:+.0f} µs"


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions: dict[str, str] = {"torch": str(torch.__version__)}
    with contextlib.suppress(ImportError):
        import lightning

        versions["lightning"] = str(lightning.__version__)
    from importlib.metadata import version

    versions["nnx-core"] = version("nnx-core")
    load = ""
    with contextlib.suppress(OSError, AttributeError):
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    return {
        "cpu": f"{cpu}, {os.cpu_count()} logical cores",
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "versions": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "threads": f"torch.set_num_threads({THREADS}) for all three contenders",
        "load": load,
    }


def print_summary(summary: Summary) -> None:
    work = summary.work
    print(f"\n{work.title} — {work.description}; medians of {summary.repeats} interleaved "
          "repeats")
    print(table(summary))
    line = overhead_line(summary)
    if line:
        print(line)


def parse_repeats(argv: Sequence[str] | None = None, default: int = 7) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeats", type=int, default=default,
                        help=f"interleaved repeats per contender (default {default}; "
                             "the figures are their medians)")
    repeats: int = parser.parse_args(argv).repeats
    if repeats < 1:
        parser.error("--repeats must be at least 1")
    return repeats


def scenario_main(workload: Callable[[], Workload]) -> None:
    """One scenario's script: measure it and print its table."""
    repeats = parse_repeats()
    summary = measure(workload(), repeats, progress=lambda line: print(line, flush=True))
    print_summary(summary)
