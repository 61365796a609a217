"""What one epoch commit costs, against a plain and a careful ``torch.save``.

Contenders, all saving the same weights and optimizer state:

* **plain** — one ``torch.save``, no flush (what a hand-written loop typically does);
* **careful** — ``torch.save`` into a temp file, ``fsync``, rename, directory
  ``fsync``: the honest limit of a durable save (:func:`careful_save`);
* **resume point** — NNx's LAST: sidecar, hard-linked compatibility copy,
  checkpoint, SHA-256 manifest, each flushed, then the directory;
* **epoch commit** — NNx's whole ``FitLoop.commit`` in a real fit (history, LAST,
  runs/best), timed per epoch with the careful save of the same net and optimizer
  right after it in the same process: in an empty runs root and in one holding 200
  finished runs, and early (epochs 1–10) against late (490–500) in a 500-epoch fit;
* **spec floor** — after each commit, the least a hand-written loop must do to put
  the spec's layout on disk (§4.2, §14.3; :func:`floor_commit`): the same ``idps.csv``
  bytes, a sidecar, a staged manifest and a checkpoint, each ``torch.save``d or dumped,
  flushed and renamed, the ``.opt.pt`` compatibility link, the manifest made live, the
  directory flushed and the previous sidecar removed, and the same for BEST (sharing
  the sidecar by a hard link) when NNx wrote BEST in that commit. What NNx adds to it
  is NNx's own cost; the rest is the layout's;
* **journal** — the long fit again with ``history=HistoryJournal(...)``: its commit at
  epochs 1–10 against 490–500 (no floor: the journal's layout is another one);
* **sized** — the issue-31 figure: FeedFwd 64 → W → W → 10 nets of about 1M and 10M
  parameters (W = 1000, 3100), two batches an epoch so the commit dominates, every
  epoch against the spec floor; then one more fit each with the commit and the floor
  broken down by where the milliseconds go (:class:`Breakdown`: serializing, hashing,
  flushing, other file-system calls, and the rest: NNx's own Python and the floor's).

Every pair runs interleaved in one process (in a fit, the order alternates by
epoch: whatever runs first after the batches meets cold caches); figures are
medians, ratios the median of the per-repeat (or per-epoch) ratios.

    uv run python tools/bench/commit_cost.py [--repeats N] [--long-epochs N] [--sized-only]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import io
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import torch
import yaml
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

if __package__ in (None, ""):  # run as a script: make tools.bench importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from nnx import NNOptimParams, NNRun, NNTrainParams
from nnx._engine.fit_loop import FitLoop
from nnx._foundation.seeding import capture_rng_state
from nnx._persistence.checkpoint import NNCheckpoint
from nnx.history import HistoryJournal
from tools.bench import workloads
from tools.bench.durable_save import careful_save, durable_write, fsync_dir


def _bytes_to(data: bytes) -> Callable[[IO[bytes]], Any]:
    return lambda handle: handle.write(data)


def _saved(obj: Any) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def floor_point(directory: Path, tag: str, generation: int, state_dict: Any,
                sidecar: bytes | Path) -> None:
    """One resume point in the spec's layout, written with bare calls: the sidecar (or a
    hard link of LAST's), a staged manifest with every file's SHA-256, the ``.opt.pt``
    compatibility link, the checkpoint,
    the manifest made live, the directory flushed, the previous sidecar removed."""
    side = directory / f"{tag}.pt.opt.{generation}.pt"
    if isinstance(sidecar, Path):
        with contextlib.suppress(FileNotFoundError):
            side.unlink()
        os.link(sidecar, side)
        side_digest = "linked"
    else:
        durable_write(side, _bytes_to(sidecar))
        side_digest = hashlib.sha256(sidecar).hexdigest()
    checkpoint = _saved({"tag": tag, "generation": generation, "state_dict": state_dict,
                         "sidecar": side.name})
    manifest = json.dumps({"generation": generation, "files": {
        "sidecar": side_digest, "checkpoint": hashlib.sha256(checkpoint).hexdigest()}})
    staged = directory / f"{tag}.pt.manifest.staged.json"
    durable_write(staged, _bytes_to(manifest.encode()))
    compat = directory / f".{tag}.pt.opt.pt.tmp"  # the compatibility copy: a hard link
    os.link(side, compat)
    os.replace(compat, directory / f"{tag}.pt.opt.pt")
    durable_write(directory / f"{tag}.pt", _bytes_to(checkpoint))
    os.replace(staged, directory / f"{tag}.pt.manifest.json")
    fsync_dir(directory)
    with contextlib.suppress(FileNotFoundError):
        (directory / f"{tag}.pt.opt.{generation - 1}.pt").unlink()


def floor_commit(directory: Path, net: nn.Module, opt: torch.optim.Optimizer, epoch: int,
                 history: bytes, *, best: bool) -> None:
    """The spec floor of one epoch commit: the history, LAST and (``best``) BEST."""
    checkpoints = directory / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    durable_write(directory / "idps.csv", _bytes_to(history))
    sidecar = _saved({"epoch": epoch, "optimizer": opt.state_dict(),
                      "rng": capture_rng_state()})
    floor_point(checkpoints, "last", epoch + 1, net.state_dict(), sidecar)
    if best:
        floor_point(checkpoints, "best", epoch + 1, net.state_dict(),
                    checkpoints / f"last.pt.opt.{epoch + 1}.pt")


# -- one resume point against one save ----------------------------------------------------


def state_for(width: int) -> tuple[nn.Module, torch.optim.Optimizer]:
    net = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(),
                        nn.Linear(width, 10))
    opt = torch.optim.Adam(net.parameters(), 1e-3)
    net(torch.randn(4, 64)).sum().backward()
    opt.step()  # populate Adam's moments
    return net, opt


def one_point(directory: Path, net: nn.Module, opt: torch.optim.Optimizer, epoch: int) -> None:
    checkpoint = NNCheckpoint(tag="last", epoch=epoch, run_id="bench", state_dict=net.state_dict(),
                              model={}, train={})
    checkpoint.save(directory / "last.pt", training_state={
        "epoch": epoch, "optimizer": opt.state_dict(), "rng": capture_rng_state()},
        position={"completed_epoch": epoch})


def _plain_state(net: nn.Module, opt: torch.optim.Optimizer, epoch: int) -> dict[str, Any]:
    return {"epoch": epoch, "model": net.state_dict(), "optimizer": opt.state_dict()}


def measure_point(width: int, repeats: int) -> dict[str, float]:
    net, opt = state_for(width)
    times: dict[str, list[float]] = {"nnx": [], "plain": [], "careful": []}
    runs: dict[str, Callable[[Path, int], None]] = {
        "nnx": lambda d, e: one_point(d, net, opt, e),
        "plain": lambda d, e: torch.save(_plain_state(net, opt, e), d / "plain.pt"),
        "careful": lambda d, e: careful_save(_plain_state(net, opt, e), d / "careful.pt"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        for epoch in range(repeats):
            for name, run in runs.items():
                start = time.perf_counter()
                run(Path(tmp), epoch)
                times[name].append(time.perf_counter() - start)
    row = {f"{k}_ms": statistics.median(v) * 1e3 for k, v in times.items()}
    row["params"] = sum(p.numel() for p in net.parameters())
    row["vs_careful"] = statistics.median(a / b for a, b in zip(times["nnx"], times["careful"],
                                                                strict=True))
    return row


# -- an epoch's commit in a real fit ------------------------------------------------------------


@contextlib.contextmanager
def paired_commits(sink: list[tuple[int, float, float, float]]) -> Iterator[None]:
    """Time every ``FitLoop.commit`` with the careful save of the same net and optimizer
    and the spec floor of the same commit: (epoch, commit seconds, careful seconds, floor
    seconds). Whatever runs first after the epoch's batches meets cold caches, so the
    order alternates: NNx first on even epochs, the contenders first on odd ones (whose
    floor then writes the history as it stood before this epoch's records)."""
    original = FitLoop.commit

    def contenders(self: FitLoop, epoch: int, best: bool) -> tuple[float, float]:
        net, opt, scratch = self.model.net, self.primary.optimizer, self.run.path.parent.parent
        start = time.perf_counter()
        careful_save(_plain_state(net, opt, epoch), scratch / "careful.pt")
        mid = time.perf_counter()
        csv = self.run.path / "idps.csv"
        history = csv.read_bytes() if csv.exists() else b""  # journal runs: no CSV
        floor_start = time.perf_counter()
        floor_commit(scratch / "floor", net, opt, epoch, history, best=best)
        return mid - start, time.perf_counter() - floor_start

    def timed(self: FitLoop, epoch: int, *args: Any, **kwargs: Any) -> None:
        # The commit writes BEST when the epoch improved and for the run's first BEST.
        best = bool(kwargs.get("improved")) or not (self.run.checkpoints_dir / "best.pt"
                                                    ).exists()
        if epoch % 2:
            careful, floor = contenders(self, epoch, best)
        start = time.perf_counter()
        original(self, epoch, *args, **kwargs)
        commit = time.perf_counter() - start
        if not epoch % 2:
            careful, floor = contenders(self, epoch, best)
        sink.append((epoch, commit, careful, floor))

    FitLoop.commit = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        FitLoop.commit = original  # type: ignore[method-assign]


def _fit(root: Path, *, epochs: int, salt: str, rows: int = workloads.ROWS,
         batch: int = 256, history: HistoryJournal | None = None) -> NNRun:
    work = workloads.mlp()
    model = work.make_model()
    loader = DataLoader(TensorDataset(work.x_train[:rows], work.y_train[:rows]),
                        batch_size=batch, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    # async_commit=False: FitLoop.commit then does the commit's whole work, which is
    # what the floor is compared with (in the background it returns once staged).
    params = NNTrainParams(n_epochs=epochs, train_loader=loader, seed=0, scheduler=None,
                           save_phase_checkpoints=False, async_commit=False,
                           optim=NNOptimParams.builder().adam(max_lr=1e-3).build())
    return model.train(params, salt=salt, root=root, verbose=False, history=history)


def populate(root: Path, count: int) -> None:
    """``count`` finished runs: one real 5-epoch fit, copied under salted ids (each a
    valid run whose run.yaml hashes to its directory, with the same BEST)."""
    source = _fit(root, epochs=5, salt="bench-source")
    for i in range(count - 1):
        run = NNRun.load(source.id, root=root)
        copy = NNRun(model_params=run.model_params, train_params=run.train_params,
                     net_params=run.net_params, salt=f"bench-{i}", root=root)
        shutil.copytree(source.path, copy.path)
        (copy.path / "run.yaml").write_text(yaml.safe_dump(copy.state(), sort_keys=False),
                                            encoding="utf-8")


def _summary(pairs: list[tuple[int, float, float, float]]) -> dict[str, float]:
    return {"commit_ms": statistics.median(c for _, c, _, _ in pairs) * 1e3,
            "careful_ms": statistics.median(k for _, _, k, _ in pairs) * 1e3,
            "floor_ms": statistics.median(f for _, _, _, f in pairs) * 1e3,
            "ratio": statistics.median(c / k for _, c, k, _ in pairs),
            "floor_ratio": statistics.median(c / f for _, c, _, f in pairs)}


def measure_roots(repeats: int) -> dict[str, dict[str, float]]:
    """The MLP fit (5 epochs, no validation) in an empty root and beside 200 runs."""
    out: dict[str, list[tuple[int, float, float, float]]] = {"0 other runs": [],
                                                             "200 other runs": []}
    with tempfile.TemporaryDirectory() as tmp:
        crowded = Path(tmp) / "crowded"
        populate(crowded, 200)
        for r in range(repeats):
            for label in (list(out) if r % 2 == 0 else list(out)[::-1]):
                root = Path(tmp) / f"empty{r}" if label.startswith("0") else crowded
                with paired_commits(out[label]):
                    _fit(root, epochs=5, salt=f"measured-{r}")
    return {label: _summary(pairs) for label, pairs in out.items()}


def measure_long(epochs: int, *, journal: bool = False) -> dict[str, dict[str, float]]:
    """One long fit (80 batches of 16 rows per epoch): early against late commits;
    ``journal``: with a history journal instead of the eager idps.csv."""
    pairs: list[tuple[int, float, float, float]] = []
    history = HistoryJournal(retention=1000) if journal else None
    with tempfile.TemporaryDirectory() as tmp, paired_commits(pairs):
        _fit(Path(tmp) / "runs", epochs=epochs, salt="long", rows=80 * 16, batch=16,
             history=history)
    early = [p for p in pairs if 1 <= p[0] <= 10]
    late = [p for p in pairs if p[0] >= epochs - 10]
    kind = ", journal" if journal else ""
    return {f"epochs 1-10 of {epochs}{kind}": _summary(early),
            f"epochs {epochs - 10}-{epochs - 1}{kind}": _summary(late)}


# -- the commit of a 1M- and a 10M-parameter net, and where its milliseconds go ---------------

SIZED_WIDTHS = {1000: 12, 3100: 8}  # hidden width → epochs: ~1.08M and ~9.85M parameters
_CATEGORIES = ("serialize", "hash", "fsync", "file calls", "rest")


class Breakdown:
    """Seconds per category of every commit timed inside :meth:`active`: ``torch.save``
    (serialize), SHA-256 (hash), ``os.fsync`` and ``os.fdatasync`` (fsync), the other
    ``os`` file-system calls (file calls), and the remainder of the commit's wall time
    (rest). NNx and the floor call the same functions (the floor flushes with
    ``os.fsync``, NNx file data with ``fdatasync`` where it exists), so their columns
    compare like with like."""

    _OS_CALLS = ("open", "replace", "rename", "link", "unlink", "stat", "lstat", "listdir",
                 "scandir", "mkdir", "readlink", "symlink", "close", "write")

    def __init__(self) -> None:
        self.totals: dict[str, dict[str, float]] = {}
        self._sink: dict[str, float] | None = None

    def _wrap(self, owner: Any, name: str, category: str) -> Callable[[], None]:
        original = getattr(owner, name)

        @functools.wraps(original)
        def timed(*args: Any, **kwargs: Any) -> Any:
            sink = self._sink
            if sink is None:
                return original(*args, **kwargs)
            self._sink = None  # nested calls count once, in the outer category
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                sink[category] = sink.get(category, 0.0) + time.perf_counter() - start
                self._sink = sink

        setattr(owner, name, timed)
        return lambda: setattr(owner, name, original)

    @contextlib.contextmanager
    def patched(self) -> Iterator[None]:
        undo = [self._wrap(torch, "save", "serialize"), self._wrap(hashlib, "sha256", "hash"),
                self._wrap(os, "fsync", "fsync")]
        if hasattr(os, "fdatasync"):  # NNx flushes file data with it (issue 38)
            undo.append(self._wrap(os, "fdatasync", "fsync"))
        undo += [self._wrap(os, name, "file calls") for name in self._OS_CALLS]
        try:
            yield
        finally:
            for restore in reversed(undo):
                restore()

    @contextlib.contextmanager
    def active(self, label: str) -> Iterator[None]:
        sink: dict[str, float] = {}
        self._sink = sink
        start = time.perf_counter()
        try:
            yield
        finally:
            self._sink = None
            sink["rest"] = time.perf_counter() - start - sum(sink.values())
            total = self.totals.setdefault(label, {})
            total["commits"] = total.get("commits", 0) + 1
            for key, value in sink.items():
                total[key] = total.get(key, 0.0) + value

    def per_commit_ms(self, label: str) -> dict[str, float]:
        total = self.totals[label]
        return {key: total.get(key, 0.0) / total["commits"] * 1e3 for key in _CATEGORIES}


def _sized_fit(root: Path, width: int, epochs: int, salt: str) -> NNRun:
    from nnx import NNModel, NNModelParams, NNParams
    from nnx.enums import Devices, Losses

    torch.manual_seed(0)
    model = NNModel(net_params=NNParams(input_dim=64, output_dim=10, hidden_dims=(width, width)),
                    params=NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY))
    x, y = torch.randn(512, 64), torch.randint(0, 10, (512,))
    loader = DataLoader(TensorDataset(x, y), batch_size=256, shuffle=True,
                        generator=torch.Generator().manual_seed(0))
    params = NNTrainParams(n_epochs=epochs, train_loader=loader, seed=0, scheduler=None,
                           save_phase_checkpoints=False, async_commit=False,
                           optim=NNOptimParams.builder().adam(max_lr=1e-4).build())
    return model.train(params, salt=salt, root=root, verbose=False)


@contextlib.contextmanager
def broken_down(breakdown: Breakdown) -> Iterator[None]:
    """Each ``FitLoop.commit`` and, right after it, the floor of the same commit, both
    timed by category (the floor second: its pages are as warm as NNx's were)."""
    original = FitLoop.commit

    def timed(self: FitLoop, epoch: int, *args: Any, **kwargs: Any) -> None:
        best = bool(kwargs.get("improved")) or not (self.run.checkpoints_dir / "best.pt"
                                                    ).exists()
        with breakdown.active("NNx"):
            original(self, epoch, *args, **kwargs)
        history = (self.run.path / "idps.csv").read_bytes()
        with breakdown.active("floor"):
            floor_commit(self.run.path.parent.parent / "floor", self.model.net,
                         self.primary.optimizer, epoch, history, best=best)

    FitLoop.commit = timed  # type: ignore[method-assign]
    try:
        with breakdown.patched():
            yield
    finally:
        FitLoop.commit = original  # type: ignore[method-assign]


def measure_sized() -> list[tuple[int, dict[str, float], dict[str, dict[str, float]]]]:
    """Per size: (parameters, the commit / floor figures, the per-commit breakdowns)."""
    rows = []
    for width, epochs in SIZED_WIDTHS.items():
        pairs: list[tuple[int, float, float, float]] = []
        breakdown = Breakdown()
        with tempfile.TemporaryDirectory() as tmp:
            with paired_commits(pairs):
                _sized_fit(Path(tmp) / "runs", width, epochs, "sized")
            with broken_down(breakdown):
                _sized_fit(Path(tmp) / "again", width, epochs, "sized-breakdown")
        ratios = [c / f for _, c, _, f in pairs]
        figures = {**_summary(pairs), "min": min(ratios), "max": max(ratios)}
        params = 64 * width + width + width * width + width + width * 10 + 10
        rows.append((params, figures, {label: breakdown.per_commit_ms(label)
                                       for label in ("NNx", "floor")}))
    return rows


def print_sized() -> None:
    print(f"\n{'net':<24}  {'NNx commit':>10}  {'spec floor':>10}  {'NNx / floor':>11}"
          f"  {'min-max':>11}")
    rows = measure_sized()
    for params, row, _ in rows:
        print(f"{f'FeedFwd, {params:,} params':<24}  {row['commit_ms']:>8.1f}ms  "
              f"{row['floor_ms']:>8.1f}ms  {row['floor_ratio']:>11.2f}  "
              f"{row['min']:>5.2f}-{row['max']:<5.2f}")
    print(f"\n{'where a commit goes (ms)':<24}  " + "  ".join(f"{c:>10}" for c in _CATEGORIES)
          + f"  {'total':>8}")
    for params, _, split in rows:
        for label, ms in split.items():
            print(f"{f'{params:,} params, {label}':<24}  "
                  + "  ".join(f"{ms[c]:>10.2f}" for c in _CATEGORIES)
                  + f"  {sum(ms.values()):>8.2f}")
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--long-epochs", type=int, default=500)
    parser.add_argument("--skip-fits", action="store_true",
                        help="only the resume point against one save")
    parser.add_argument("--sized-only", action="store_true",
                        help="only the 1M / 10M-parameter commits against the spec floor")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.sized_only:
        print_sized()
        return
    print(f"{'params':>10}  {'resume point':>12}  {'torch.save':>10}  {'careful':>9}  "
          f"{'vs careful':>10}")
    for width in (128, 512, 2048):
        row = measure_point(width, args.repeats)
        print(f"{row['params']:>10,}  {row['nnx_ms']:>10.2f}ms  {row['plain_ms']:>8.2f}ms  "
              f"{row['careful_ms']:>7.2f}ms  {row['vs_careful']:>10.2f}")
    if args.skip_fits:
        return
    print(f"\n{'MLP fit, epoch commit':<36}  {'NNx commit':>10}  {'careful':>9}  {'ratio':>6}"
          f"  {'spec floor':>10}  {'NNx / floor':>11}")
    results = {**measure_roots(max(1, args.repeats // 5)), **measure_long(args.long_epochs),
               **measure_long(args.long_epochs, journal=True)}
    for label, row in results.items():
        # A journal's floor would be its own layout (chunks, index, manifest), not this one.
        floor = ("n/a".rjust(10) + "n/a".rjust(13) if label.endswith("journal") else
                 f"{row['floor_ms']:>8.2f}ms  {row['floor_ratio']:>11.2f}")
        print(f"{label:<36}  {row['commit_ms']:>8.2f}ms  {row['careful_ms']:>7.2f}ms  "
              f"{row['ratio']:>6.2f}  {floor}")
    print_sized()


if __name__ == "__main__":
    main()
