"""The SIGKILL harness of persistence/test_crash_sigkill.py: the trainer script, its
servers, the trials and their checks (that module's docstring describes them)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
import torch
import yaml

from nnx import NNCheckpoint, NNRun
from nnx._journal.history_csv import read_idps_csv
from nnx._persistence.best import current_best
from nnx._persistence.checkpoint import checkpoint_files
from nnx._persistence.point_manifest import ResumePointError
from nnx._persistence.point_verify import verify_point
from nnx._persistence.resume_point import stray_files
from nnx.cli import main

TRAINER = r'''
"""Trainer server for the crash-safety test.

Started once per worker, it imports torch and pays its lazy imports once, then forks
one trainer per job read from stdin (a trial, the reference or a resume). A trainer
prints PID first and, when done, DONE and waits: only the test's SIGKILL ends it.
Jobs: `train ROOT OUT|- WIDEN` and `resume ROOT RUN_ID OUT|- [WIDEN OVERWRITE]`.
"""
import os
import signal
import sys
import time
import traceback

import torch

torch.set_num_threads(1)

import nnx._persistence.resume_point as resume_point
import nnx._persistence.run as run_module
import nnx._engine.epoch_commit as epoch_commit
import nnx._engine.fit_loop as fit_loop
from nnx import (Callback, NNDataset, NNModel, NNOptimParams, NNParams, NNSchedulerParams,
                 NNTrainParams)


def say(*parts):
    # One write(2) per line: a kill never leaves half a marker line behind.
    os.write(1, (" ".join(map(str, parts)) + "\n").encode())


def widen(delay):
    """Sleep around each resume-point file write and after each run-file write, so a
    kill lands inside the publish windows (test code: the library is not touched)."""
    write_bytes, write_text = resume_point.atomic_write_bytes, run_module.atomic_write_text

    def slow_write_bytes(path, data, **kwargs):
        time.sleep(delay)
        out = write_bytes(path, data, **kwargs)
        say("W", os.path.basename(path))  # the file is in place
        time.sleep(delay)
        return out

    def slow_write_text(path, text, **kwargs):
        out = write_text(path, text, **kwargs)
        time.sleep(delay)
        return out

    resume_point.atomic_write_bytes = slow_write_bytes
    run_module.atomic_write_text = slow_write_text


# C+ / C- bracket the epoch transaction: from the loop's commit call to the end of its
# writing, which a background commit (issue 38) does on the writer's thread.
committer = getattr(epoch_commit, "EpochCommit", None)
background = committer is not None and hasattr(committer, "write")
loop = getattr(fit_loop, "FitLoop", None)
if loop is not None and hasattr(loop, "commit"):
    commit = loop.commit

    def marked_commit(self, epoch, *args, **kwargs):
        say("C+", epoch)
        commit(self, epoch, *args, **kwargs)
        if not background:
            say("C-", epoch)

    loop.commit = marked_commit
if background:
    write = committer.write

    def marked_write(self, staged):
        write(self, staged)
        say("C-", staged.epoch)

    committer.write = marked_write


class Markers(Callback):
    def on_train_begin(self, ctx):
        ctx.update_listeners.append(lambda c: say("U", c.committed_updates))

    def on_epoch_begin(self, ctx):
        say("E", ctx.epoch)


def dataset():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(96, 5, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] > 0).long() + (x[:, 2] > 1).long()
    return NNDataset(x, y, val_proportion=0.25, batch_sizes=(9, None, None), seed=7)


def plan(**changes):
    data = dataset()  # fresh loaders: their generators start from their seed
    return NNTrainParams(
        n_epochs=6, train_loader=data.train_loader, val_loader=data.val_loader,
        optim=NNOptimParams.builder().adam(max_lr=3e-2).build(),
        scheduler=NNSchedulerParams.builder().reduce_on_plateau(
            factor=0.5, patience=0, threshold=1e-3).build(),
        seed=0, **changes)


def job(mode, root, *rest):
    changes, out = {}, None
    if mode == "resume":
        source, out, delay, overwrite = (*rest, "0", "0") if len(rest) == 2 else rest
        changes = dict(resume_from_run_id=source, resume_mode="stateful",
                       resume_epochs="planned", overwrite_existing=overwrite == "1")
    else:
        out, delay = rest
    out = None if out == "-" else out
    if float(delay):
        widen(float(delay))
    torch.manual_seed(11)  # a resume replaces these weights; this only fixes the start
    model = NNModel(net_params=NNParams(input_dim=5, output_dim=3, hidden_dims=(16, 16),
                                        dropout_prob=0.2))
    params = plan(**changes)
    say("GO")
    run = model.train(params, callbacks=[Markers()], verbose=False, root=root)
    if out is not None:
        torch.save(model.net.state_dict(), out)
    say("DONE", run.id)


def warm_up():
    """Torch imports torch._dynamo (seconds) when the first optimizer is built: once here."""
    net = torch.nn.Linear(2, 2)
    optimizer = torch.optim.Adam(net.parameters())
    net(torch.zeros(1, 2)).sum().backward()
    optimizer.step()


def serve():
    warm_up()
    say("READY")
    for line in sys.stdin:
        if not line.split():
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            # Job lines are the server's: nothing in the trainer may read them.
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
            sys.stdin = open(os.devnull)
            try:
                say("PID", os.getpid())
                job(*line.split())
            except BaseException:
                traceback.print_exc()
                sys.stderr.flush()
                say("FAIL")
            while True:  # never exit on its own: the test kills it
                signal.pause()
        _, status = os.waitpid(pid, 0)
        # On a line of its own even after a partial line the trainer's own prints left.
        say("\nEXIT", pid, os.waitstatus_to_exitcode(status))


serve()
'''


T = TypeVar("T")


WAIT = 120.0  # seconds any one wait for a trainer may take before the test fails


N_EPOCHS, BATCHES = 6, 8


TEMP = re.compile(r"^\.(?P<real>.+)\.[0-9a-f]{8}$")  # the atomic writer's .<name>.<hex>
SIDECAR = re.compile(r"^(?P<checkpoint>.+\.pt)\.opt\.\d+\.pt$")  # <tag>.pt.opt.<gen>.pt


BEST_TEMP = re.compile(r"^\.best\.\d+\.[0-9a-f]{32}$")  # runs/best's symlink being replaced


@dataclass
class Trial:
    index: int
    kind: str  # "start", "batch", "commit" or "publish"
    target: tuple[str, ...]  # the marker line after which the delay starts
    delay: float
    widen: float
    occurrence: int = 1  # the target line's n-th appearance starts the delay
    root: Path = Path()
    source: Trial | None = None  # a resume trial: the killed trial whose run it resumes
    source_files: dict[str, bytes] = field(default_factory=dict)  # its run, before
    killed: bool = False
    lines: list[list[str]] = field(default_factory=list)
    # filled by the disk check
    run_id: str | None = None
    last_epoch: int | None = None
    in_commit: bool = False  # the trainer's last commit marker was C+
    torn_commit: bool = False  # the disk shows an epoch transaction cut short
    evidence: list[str] = field(default_factory=list)


class Server:
    """One trainer server process; runs one job (one forked trainer) at a time.

    A reader thread queues the server's output lines, so every wait has a deadline:
    a trainer that stops answering fails the test instead of hanging it.
    """

    def __init__(self, script: Path, log: Path) -> None:
        self.log = log
        with open(log, "w") as err:
            self.proc = subprocess.Popen([sys.executable, str(script)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=err, text=True,
                                         cwd=log.parent)
        self.lines: queue.Queue[list[str] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.read_until(lambda words: words == ["READY"])

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.split())
        self.lines.put(None)

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def read_until(self, stop: Callable[[list[str]], bool],
                   timeout: float = WAIT) -> list[list[str]]:
        deadline = time.monotonic() + timeout
        lines: list[list[str]] = []
        while True:
            try:
                words = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no answer from the trainer in {timeout}s (server "
                                     f"exit {self.proc.poll()}):\n{lines[-10:]}\n"
                                     f"{self.log_tail()}") from None
            if words is None:
                raise AssertionError(f"the trainer server ended:\n{lines[-10:]}\n"
                                     f"{self.log_tail()}")
            lines.append(words)
            if stop(words):
                return lines

    def start(self, *job: str) -> tuple[int, list[list[str]]]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(" ".join(job) + "\n")
        self.proc.stdin.flush()
        lines = self.read_until(lambda words: words[:1] in (["PID"], ["EXIT"]))
        assert lines[-1][0] == "PID", f"{job}: {lines}\n{self.log_tail()}"
        return int(lines[-1][1]), lines

    def kill(self, pid: int) -> list[list[str]]:
        """SIGKILL the trainer; what it printed before dying, up to the server's EXIT."""
        os.kill(pid, signal.SIGKILL)  # it never exits by itself, so the pid is still ours
        lines = self.read_until(lambda words: words[:1] == ["EXIT"])
        assert lines[-1] == ["EXIT", str(pid), str(-signal.SIGKILL)], lines
        return lines

    def run(self, *job: str, until: Callable[[list[str]], bool],
            delay: float = 0.0) -> list[list[str]]:
        """Start a job, wait for the line ``until`` accepts, ``delay`` seconds, SIGKILL."""
        pid, lines = self.start(*job)
        try:
            lines += self.read_until(lambda words: until(words) or words[:1] in (
                ["DONE"], ["FAIL"], ["EXIT"]))
        except BaseException:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            raise
        assert lines[-1][:1] != ["EXIT"], f"{job} died by itself: {lines[-5:]}"
        failed = lines[-1][:1] == ["FAIL"]
        if not failed:
            time.sleep(delay)
        lines += self.kill(pid)
        assert not failed, f"{job} failed:\n{self.log_tail()}"
        return lines

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def _finish(server: Server, *job: str) -> list[list[str]]:
    """Run a job to its end (DONE), then end the waiting trainer."""
    lines = server.run(*job, until=lambda words: words[:1] == ["DONE"])
    assert any(words[:1] == ["DONE"] for words in lines), lines
    return lines


def _kill_trial(server: Server, trial: Trial) -> Trial:
    seen: list[int] = []

    def until(words: list[str]) -> bool:
        seen.extend([1] if tuple(words) == trial.target else [])
        return len(seen) == trial.occurrence

    if trial.source is None:
        job = ("train", str(trial.root), "-", str(trial.widen))
    else:  # a copy of the source trial's root, so its own resume stays possible
        assert trial.source.run_id is not None
        shutil.copytree(trial.source.root, trial.root, symlinks=True)
        trial.source_files = _files(trial.root / trial.source.run_id)
        job = ("resume", str(trial.root), trial.source.run_id, "-", str(trial.widen), "0")
    trial.lines = server.run(*job, until=until, delay=trial.delay)
    trial.killed = not any(words[:1] == ["DONE"] for words in trial.lines)
    commits = [words[0] for words in trial.lines if words[:1] in (["C+"], ["C-"])]
    trial.in_commit = trial.killed and bool(commits) and commits[-1] == "C+"
    return trial


def _plan_trials(rng: random.Random) -> list[Trial]:
    trials: list[Trial] = []
    kinds = ["start"] * 6 + ["batch"] * 36 + ["commit"] * 36 + ["publish"] * 14
    for index, kind in enumerate(kinds):
        if kind == "start":  # reservation, run.yaml, the first batches
            trials.append(Trial(index, kind, ("GO",), rng.uniform(0.0, 0.06), 0.01))
        elif kind == "batch":  # anywhere in the epochs, unwidened
            update = rng.randint(1, N_EPOCHS * BATCHES)
            trials.append(Trial(index, kind, ("U", str(update)), rng.uniform(0.0, 0.004), 0.0))
        elif kind == "commit":  # inside (or just after) an epoch's commit, widened
            epoch = rng.randrange(N_EPOCHS)
            trials.append(Trial(index, kind, ("C+", str(epoch)), rng.uniform(0.0, 0.2), 0.01))
        else:  # LAST published, its manifest still staged: the narrowest window
            trials.append(Trial(index, kind, ("W", "last.pt"), rng.uniform(0.0, 0.02), 0.03,
                                occurrence=rng.randint(1, N_EPOCHS - 1)))
    rng.shuffle(trials)
    return trials


def _plan_resume_trials(rng: random.Random, sources: list[Trial], first: int,
                        count: int) -> list[Trial]:
    """Kills during a resume of a killed trial's run: while it verifies and plans, in its
    epochs, and inside its commits (widened)."""
    trials = []
    for index in range(first, first + count):
        source = sources[(index - first) % len(sources)]
        assert source.last_epoch is not None
        epoch = rng.randint(source.last_epoch + 1, N_EPOCHS - 1)
        kind = ("resume-start", "resume-batch", "resume-commit")[index % 3]
        if kind == "resume-start":
            trial = Trial(index, kind, ("GO",), rng.uniform(0.0, 0.1), 0.01)
        elif kind == "resume-batch":
            update = rng.randint(epoch * BATCHES + 1, (epoch + 1) * BATCHES)
            trial = Trial(index, kind, ("U", str(update)), rng.uniform(0.0, 0.004), 0.0)
        else:
            trial = Trial(index, kind, ("C+", str(epoch)), rng.uniform(0.0, 0.2), 0.01)
        trial.source = source
        trials.append(trial)
    return trials


def _orphaned_sidecar(run_dir: Path, name: str) -> bool:
    """``name`` is a generation sidecar its point's manifest no longer names: settling a
    staged manifest removes the one the settled point dropped (issue 36 item 3)."""
    sidecar = SIDECAR.match(Path(name).name)
    if sidecar is None:
        return False
    checkpoint = run_dir / Path(name).parent / sidecar["checkpoint"]
    return Path(name).name not in ({checkpoint.name} | _named_sidecars(checkpoint))


def _named_sidecars(checkpoint: Path) -> set[str]:
    manifest = checkpoint.with_name(checkpoint.name + ".manifest.json")
    if not manifest.is_file():
        return set()
    entry = json.loads(manifest.read_text())["files"].get("sidecar")
    return {entry["name"]} if entry else set()


def _check_source_untouched(trial: Trial, run_dir: Path) -> None:
    before, after = trial.source_files, _files(run_dir)
    removed = set(before) - set(after)
    for name in set(after) - set(before):  # only a staged manifest made live
        assert before.get(name + ".staged") == after[name], (trial.index, name)
    for name in removed:  # only what --repair would remove
        assert (TEMP.match(Path(name).name) or name.endswith(".staged")
                or Path(name).name.startswith("chunk-")
                or _orphaned_sidecar(run_dir, name)), (trial.index, name)
    for name, data in after.items():
        if data == before.get(name + ".staged") or data == before.get(name):
            continue
        if name.endswith(".opt.pt"):  # the compatibility copy, put on the settled point
            assert any(data == other for other_name, other in after.items()
                       if other_name != name and ".opt." in other_name), (trial.index, name)
        else:  # a live manifest replaced by the staged one it settled
            assert before.get(name + ".staged") == data, (trial.index, name)
    if removed:
        trial.evidence.append("resume removed the source's leftovers")


def _files(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` but the lock files readers may create."""
    return {p.relative_to(directory).as_posix(): p.read_bytes()
            for p in sorted(directory.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


def _check_trial(trial: Trial) -> None:
    """Everything a kill may leave must read back; record where the kill landed."""
    root = trial.root
    if not root.is_dir():
        trial.evidence.append("nothing on disk")
        return
    run_dirs = [d for d in root.iterdir()
                if d.is_dir() and not d.is_symlink() and not d.name.startswith(".")]
    source = None if trial.source is None else trial.source.run_id
    assert len(run_dirs) <= (1 if source is None else 2), run_dirs
    # No temp file is ever taken for a run.
    assert [r.id for r in NNRun.all(root=root)] == sorted(
        d.name for d in run_dirs if (d / "run.yaml").is_file())
    temps = [p for p in root.rglob(".*") if p.is_file() and TEMP.match(p.name)]
    if temps:
        trial.evidence.append("temp " + ", ".join(sorted(p.name for p in temps)))
    if any(BEST_TEMP.match(p.name) for p in root.iterdir()):
        trial.evidence.append("best pointer temp")
    real_files: list[Path] = []
    for run_dir in sorted(run_dirs):
        if run_dir.name == source:
            # A resume writes no data to its source, wherever it was killed: it only
            # removes the leftovers of the source's own kill (a staged manifest it
            # settles becomes the live one), under the source's lease.
            _check_source_untouched(trial, run_dir)
            assert trial.source is not None
            _check_run(trial, run_dir, first_epoch=0, own=False)
            real_files += _real_files(run_dir)
            continue
        trial.run_id = run_dir.name
        first = 0 if trial.source is None or trial.source.last_epoch is None else (
            trial.source.last_epoch + 1)
        _check_run(trial, run_dir, first_epoch=first, own=True)
        real_files += _real_files(run_dir)
    # Every real file reads back whole; so does the real file next to each stranded temp.
    for path in real_files:
        _read_back(path)
    for temp in temps:
        match = TEMP.match(temp.name)
        assert match is not None
        real = temp.with_name(match["real"])
        assert not real.exists() or real in real_files, temp
    # runs/best points at a committed run, or is absent.
    best = current_best(root)
    assert best in (None, *(d.name for d in run_dirs))
    if best is not None:
        assert (root / best / "checkpoints" / "best.pt").is_file()
    trial.torn_commit = any(
        e.startswith("history ahead") or "staged" in e or "sidecars" in e
        or "unpublished" in e for e in trial.evidence)


def _real_files(run_dir: Path) -> list[Path]:
    return [p for p in run_dir.rglob("*") if p.is_file() and not p.name.startswith(".")
            and not p.name.endswith(".lock")]


def _check_run(trial: Trial, run_dir: Path, *, first_epoch: int, own: bool) -> None:
    """One run directory a kill left: its history stops at LAST, every published point
    verifies, loads, has a compatibility copy that agrees with it, and the next save
    leaves no orphan. ``own``: the run the trial's process trained (not a resume's
    source), whose LAST the trial records."""
    root, run_id = run_dir.parent, run_dir.name
    checkpoints = run_dir / "checkpoints"
    if not (run_dir / "run.yaml").is_file():  # killed while reserving: nothing committed yet
        trial.evidence.append("reserved, no run.yaml")
        assert not (run_dir / "idps.csv").exists()
        assert not checkpoints.is_dir() or not any(checkpoints.glob("*.pt*"))
        return

    run = NNRun.load(run_id, root=root)
    last = run.committed_epoch()
    if own:
        trial.last_epoch = last
    # The history is exactly the committed epochs: none past LAST, none missing before it.
    epochs = [idp.epoch for idp in run.idps]
    expected = [] if last is None else [e for e in range(first_epoch, last + 1)
                                        for _ in range(BATCHES)]
    assert epochs == expected, (trial.index, last, epochs)
    assert [r.epoch for r in run.epoch_records()] == sorted(set(expected))
    raw = run_dir / "idps.csv"
    if raw.is_file():
        written = {idp.epoch for idp in read_idps_csv(raw.read_text(encoding="utf-8"))}
        if written and max(written) > (-1 if last is None else last):
            trial.evidence.append("history ahead of LAST")

    # Every published resume point verifies and loads; no torn/mixed/corrupted one is left.
    files = checkpoint_files(checkpoints)
    assert all(not p.name.startswith(".") for p in files), files
    tags = {p.name[:-3] for p in files}
    for manifest in checkpoints.glob("*.pt.manifest.json"):
        assert (checkpoints / manifest.name[:-len(".manifest.json")]).is_file(), (
            f"torn: {manifest.name} outlived its checkpoint")
    for tag in sorted(tags):
        point = NNCheckpoint.verify(run_id, tag, root=root)
        assert point is not None, f"{tag}.pt was published without a manifest"
        if point.staged:
            trial.evidence.append(f"{tag} staged manifest verified")
        checkpoint = NNCheckpoint.load(run_id, tag, root=root)
        assert (checkpoint.generation, checkpoint.checkpoint_id) == (
            point.generation, point.checkpoint_id)
        assert checkpoint.epoch == point.position["completed_epoch"]
        state = checkpoint.training_state()
        assert state is not None and state["generation"] == point.generation
        assert last is not None and checkpoint.epoch <= last, (tag, checkpoint.epoch, last)
        live = NNCheckpoint.resume_point(run_id, tag, root=root)
        sidecars = sorted(p.name for p in checkpoints.glob(f"{tag}.pt.opt.*.pt")
                          if p.name != f"{tag}.pt.opt.pt")
        if live is None or live.generation != point.generation or len(sidecars) > 1:
            trial.evidence.append(f"{tag} sidecars {sidecars}, live manifest "
                                  f"{None if live is None else live.generation}")
        _check_compat(trial, checkpoints, tag)
    if last is not None:  # LAST's record is the history's last one
        last_record = NNCheckpoint.load(run_id, "last", root=root).idp
        assert last_record is not None and run.idps[-1].iter_idx == last_record.iter_idx
    # A staged manifest whose checkpoint was never published (a tag's first save) is not a
    # point: the tag reads as absent, exactly like one never written.
    for staged in checkpoints.glob("*.pt.manifest.json.staged"):
        tag = staged.name[:-len(".pt.manifest.json.staged")]
        if tag in tags:
            trial.evidence.append(f"{tag} staged manifest left")
            continue
        trial.evidence.append(f"{tag} unpublished first generation")
        assert not (checkpoints / f"{tag}.pt.manifest.json").exists()
        with pytest.raises(ResumePointError, match=rf"^torn resume point: .*{tag}\.pt is missing"):
            NNCheckpoint.verify(run_id, tag, root=root)
        json.loads(staged.read_text(encoding="utf-8"))  # the staged manifest itself is whole
    # The command line agrees: every published point verifies, and the only failures are
    # the points a kill after LAST left owed (issue 24), which --repair then writes.
    with contextlib.redirect_stdout(io.StringIO()) as shown:
        rc = main(["runs", "verify", run_id, "--root", str(root)])
    failures = [line for line in shown.getvalue().splitlines() if line.startswith("FAIL")]
    assert all(" owed: " in line for line in failures), shown.getvalue()
    assert rc == (1 if failures else 0), shown.getvalue()
    if "warn" in shown.getvalue():
        trial.evidence.append("orphans reported")
    _check_next_save(trial, run_dir)
    if failures:
        trial.evidence.append("owed points repaired")
        with contextlib.redirect_stdout(io.StringIO()) as repaired:
            assert main(["runs", "verify", run_id, "--root", str(root), "--repair"]) == 0, (
                repaired.getvalue())
        with contextlib.redirect_stdout(io.StringIO()) as again:
            assert main(["runs", "verify", run_id, "--root", str(root)]) == 0, again.getvalue()


def _check_compat(trial: Trial, checkpoints: Path, tag: str) -> None:
    """``<tag>.pt.opt.pt`` holds the live manifest's sidecar; only while a publish is under
    way (a staged manifest exists) may it hold the staged point's instead."""
    live = checkpoints / f"{tag}.pt.manifest.json"
    compat = checkpoints / f"{tag}.pt.opt.pt"
    if not live.is_file():
        return
    named = json.loads(live.read_text(encoding="utf-8"))["files"].get("sidecar")
    if named is None:
        assert not compat.exists(), f"{tag}: a compatibility copy without a sidecar"
        return
    allowed = {"live": (checkpoints / named["name"]).read_bytes()}
    staged = live.with_name(live.name + ".staged")
    if staged.is_file():
        entry = json.loads(staged.read_text(encoding="utf-8"))["files"].get("sidecar")
        if entry is not None and (checkpoints / entry["name"]).is_file():
            allowed["staged"] = (checkpoints / entry["name"]).read_bytes()
    held = compat.read_bytes()
    found = [role for role, data in allowed.items() if data == held]
    assert found, f"{tag}: the compatibility copy is neither the live nor the staged sidecar"
    if found == ["staged"]:
        trial.evidence.append(f"{tag} compatibility copy on the staged point")


def _check_next_save(trial: Trial, run_dir: Path) -> None:
    """Save every published point once more (in a copy): the save settles a staged
    manifest and leaves exactly the new sidecar, its compatibility copy and no orphan."""
    copy = run_dir.parent.with_name(f"{run_dir.parent.name}.next") / run_dir.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run_dir, copy, symlinks=True)
    checkpoints = copy / "checkpoints"
    for path in checkpoint_files(checkpoints):
        checkpoint = NNCheckpoint.from_file(path)
        state = checkpoint.training_state()
        checkpoint.save(path, training_state=state,
                        position={"completed_epoch": checkpoint.epoch})
        point = verify_point(path)
        assert point is not None and not point.staged
        assert stray_files(path) == [], (trial.index, path.name, stray_files(path))
        sides = sorted(p.name for p in checkpoints.glob(f"{path.name}.opt.*"))
        expected = [] if point.sidecar is None else sorted([point.sidecar, f"{path.name}.opt.pt"])
        assert sides == expected, (trial.index, sides)
        if point.sidecar is not None:
            assert ((checkpoints / f"{path.name}.opt.pt").read_bytes()
                    == (checkpoints / point.sidecar).read_bytes())
    shutil.rmtree(copy.parent)


def _read_back(path: Path) -> None:
    """A real (non-temp) file parses as what its name says it is."""
    name = path.name
    if name.endswith(".yaml"):
        assert isinstance(yaml.safe_load(path.read_text(encoding="utf-8")), dict), path
    elif name.endswith(".csv"):
        read_idps_csv(path.read_text(encoding="utf-8"))
    elif name.endswith(".pt"):
        assert isinstance(torch.load(path, map_location="cpu", weights_only=False), dict), path
    elif name.endswith((".json", ".staged")):
        assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict), path


@contextlib.contextmanager
def _servers(script: Path, count: int) -> Iterator[queue.Queue[Server]]:
    """``count`` trainer servers, started in parallel, lent out one job at a time."""
    pool: queue.Queue[Server] = queue.Queue()
    started: list[Server] = []
    try:
        with ThreadPoolExecutor(max_workers=count) as starter:
            for server in starter.map(
                    lambda i: Server(script, script.with_name(f"server{i}.log")), range(count)):
                started.append(server)
                pool.put(server)
        yield pool
    finally:
        for server in started:
            with contextlib.suppress(Exception):
                server.close()
            if server.proc.poll() is None:
                server.proc.kill()
                server.proc.wait()


def _lend(pool: queue.Queue[Server], work: Callable[..., T], *args: Any) -> T:
    """Run ``work(server, *args)`` on the next free server."""
    server = pool.get()
    try:
        return work(server, *args)
    finally:
        pool.put(server)


RESUME_KILLS = 20  # trials that kill a resume of a killed trial's run
