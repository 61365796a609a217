"""Driver of persistence/test_commit_crash_points.py: one process per scenario.

It trains the reference (uninterrupted) runs, then for every file-system operation
of one epoch's commit (counted at the ``os`` level: open, write, fsync, fdatasync,
replace, rename, link, symlink, unlink, mkdir, rmdir, ftruncate) forks a child that trains
the same runs in a fresh root and ``os._exit``s right before that operation, as a
SIGKILL there would: no ``finally``, no cleanup. The driver then recovers the
root the documented way (``nnx runs verify --repair``, then a planned resume
when LAST is short of the plan, or a retry when nothing committed) and reports,
per crash point, whether the BEST runs/best leads to equals the reference's
bit for bit, and what the one repair pass left (``left``: runs/best temps in the
root, a run's temps or staged manifests, orphan sidecars; issue 36 item 3).
``nnx.testing.writer_kill_points`` gives any other writer the same kill points.
Run as ``python commit_crash_points.py SCENARIO WORKDIR``; prints
one JSON document.

Scenarios: ``plain-e0`` / ``plain-e1`` (the commit of epoch 0 / 1 of a 2-epoch
run), ``journal-e1`` (the same run with a history journal), ``resumed-e1`` (a
run resumed from another's epoch 0, killed in its own epoch-1 commit) and
``enospc-best`` (no kill: ``best.pt`` cannot be written once, the fit fails).
Each runs with the default background commit (the operations of the staging in the
training thread and of the writer's thread are counted, nothing else the process does
meanwhile); ``<scenario>-sync`` runs it with ``async_commit=False``.
In every root a salted 1-epoch run trains first and holds runs/best with the
same score as the run's epoch 0, so epoch 1's improvement is a hand-over.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import shutil
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import torch

torch.set_num_threads(1)

import nnx._engine.epoch_commit as epoch_commit  # noqa: E402
from nnx import NNCheckpoint, NNModel, NNParams, NNTrainParams  # noqa: E402
from nnx._persistence.best import current_best  # noqa: E402
from nnx._surface.kill_points import OpCut  # noqa: E402
from nnx.cli import main as cli  # noqa: E402
from nnx.history import HistoryJournal  # noqa: E402
from nnx.testing import sgd  # noqa: E402


def model() -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)))


def batches(n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Learnable data (the class is the largest of the first three features), so the
    second epoch improves on the first (0.6875 → 0.625 validation error)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n * 8, 4, generator=g)
    y = x[:, :3].argmax(1)
    return [(x[i:i + 8], y[i:i + 8]) for i in range(0, n * 8, 8)]


SYNC = False  # set from the scenario's -sync suffix: the commit is written inline


def params(n_epochs: int, **changes: Any) -> NNTrainParams:
    return NNTrainParams(n_epochs=n_epochs, train_loader=batches(3, 0),
                         val_loader=batches(4, 1), optim=sgd(0.1), scheduler=None,
                         seed=0, async_commit=not SYNC, **changes)


def journal(scenario: str) -> Any:
    return HistoryJournal(retention=4, chunk_size=2) if scenario.startswith("journal") else None


def incumbent(root: Path) -> None:
    model().train(params(1), salt="incumbent", verbose=False, root=root)


def source(root: Path) -> str:
    return model().train(params(1), salt="source", verbose=False, root=root).id


def target(root: Path, scenario: str, **changes: Any) -> str:
    """The run whose commit is cut: 2 epochs (or the resume of ``source`` to epoch 1)."""
    if scenario.startswith("resumed"):
        src = source(root) if not (root / ".source").is_file() else (
            root / ".source").read_text()
        (root / ".source").write_text(src)
        plan = params(1, resume_from_run_id=src, resume_mode="stateful", **changes)
    else:
        plan = params(2, **changes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return model().train(plan, verbose=False, root=root, history=journal(scenario)).id


def best_state(root: Path) -> dict[str, torch.Tensor]:
    owner = current_best(root)
    assert owner is not None, "no runs/best"
    return dict(NNCheckpoint.load(owner, "best", root=root).state_dict)


class Cut(OpCut):
    """Counts file-system operations of epoch ``epoch``'s commit: its staging (in the
    training thread) and its writing (in the writer's thread, or inline), and only in
    the thread doing them; ``os._exit``s right before operation number ``at`` (None:
    count only)."""

    def __init__(self, epoch: int, at: int | None) -> None:
        super().__init__(at)
        self.epoch = epoch
        self.threads: set[int] = set()

    def _wrap(self, original: Any) -> Any:
        def op(*args: Any, **kwargs: Any) -> Any:
            if threading.get_ident() in self.threads:
                if self.at is not None and self.count == self.at:
                    os._exit(137)
                self.count += 1
            return original(*args, **kwargs)

        return op

    def watch(self, name: str, epoch_of: Any) -> None:
        method = getattr(epoch_commit.EpochCommit, name)
        cut = self

        def watched(self_: Any, *args: Any, **kwargs: Any) -> Any:
            if epoch_of(*args) != cut.epoch:
                return method(self_, *args, **kwargs)
            me = threading.get_ident()
            cut.threads.add(me)
            try:
                return method(self_, *args, **kwargs)
            finally:
                cut.threads.discard(me)

        setattr(epoch_commit.EpochCommit, name, watched)

    def install(self) -> None:
        self.install_ops()
        self.watch("stage", lambda epoch, *rest: epoch)
        self.watch("write", lambda staged: staged.epoch)


def run_child(root: Path, scenario: str, epoch: int, at: int | None, pipe: int) -> None:
    """In the forked child: train the cut run; report the op count; never return."""
    try:
        cut = Cut(epoch, at)
        cut.install()
        target(root, scenario)
        os.write(pipe, str(cut.count).encode())
    except BaseException:  # a failure the kill did not cause: the parent sees rc 1
        os._exit(1)
    os._exit(0)


def fork_run(root: Path, scenario: str, epoch: int, at: int | None) -> tuple[int, int]:
    """(exit code, ops counted) of a child training the cut run in ``root``."""
    read, write = os.pipe()
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        run_child(root, scenario, epoch, at, write)
    os.close(write)
    with os.fdopen(read, "rb") as handle:
        counted = handle.read()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), int(counted or -1)


def leftovers(root: Path) -> list[str]:
    """What one ``--repair`` pass left that a second would remove: the runs root's
    runs/best temps, each run's temps and staged manifests, and each point's orphan
    sidecars."""
    from nnx._persistence.leftovers import find_best_temps, find_leftovers
    from nnx._persistence.resume_point import stray_files

    found = list(find_best_temps(root))
    for run_id in sorted(run_dirs(root)):
        found += [f"{run_id}/{name}" for name in find_leftovers(root, run_id)]
        checkpoints = root / run_id / "checkpoints"
        for point in sorted(checkpoints.glob("*.pt")) if checkpoints.is_dir() else []:
            if ".opt." not in point.name:
                found += [f"{run_id}/checkpoints/{n}" for n in stray_files(point)]
    return found


def recover(root: Path, scenario: str, left: list[str] | None = None) -> list[str]:
    """What a user does after the kill: repair, then finish the plan. The steps taken."""
    steps = []
    runs = run_dirs(root)
    cut_id = target_id(root, scenario)
    out = io.StringIO()
    for run_id in sorted(runs):
        with contextlib.redirect_stdout(out):
            cli(["runs", "verify", run_id, "--root", str(root), "--repair"])
    steps.append("repair")
    if left is not None:
        left += leftovers(root)  # one pass must be enough
    last = root / cut_id / "checkpoints" / "last.pt"
    planned_end = 1  # the last epoch of the cut run's plan
    committed = NNCheckpoint.load(cut_id, "last", root=root).epoch if last.is_file() else None
    if committed is None:
        target(root, scenario, overwrite_existing=True)  # nothing committed: train it again
        steps.append("retry")
    elif committed < planned_end:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model().train(params(2, resume_from_run_id=cut_id, resume_mode="stateful",
                                 resume_epochs="planned"), verbose=False, root=root,
                          history=journal(scenario))
        steps.append("resume")
    return steps


def run_dirs(root: Path) -> set[str]:
    return {p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith(".")
            and p.name != "best" and not p.is_symlink()}


def target_id(root: Path, scenario: str) -> str:
    """The cut run's id: the run directory the template root did not have."""
    (found,) = run_dirs(root) - set((root / ".template-runs").read_text().split())
    return found


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def prepared(work: Path, name: str, scenario: str) -> Path:
    root = work / name
    incumbent(root)
    if scenario.startswith("resumed"):
        (root / ".source").write_text(source(root))
    (root / ".template-runs").write_text(" ".join(sorted(run_dirs(root))))
    return root


def crash_points(scenario: str, work: Path) -> dict[str, Any]:
    epoch = 0 if scenario.endswith("e0") else 1
    reference = prepared(work, "reference", scenario)
    target(reference, scenario)
    expected = best_state(reference)
    template = prepared(work, "template", scenario)
    rc, total = fork_run(copy(template, work / "count"), scenario, epoch, None)
    assert rc == 0 and total > 0, (rc, total)
    results = []
    for at in range(total):
        root = copy(template, work / f"cut{at}")
        rc, _ = fork_run(root, scenario, epoch, at)
        entry: dict[str, Any] = {"at": at, "rc": rc}
        try:
            entry["left"] = []
            entry["steps"] = recover(root, scenario, entry["left"])
            entry["ok"] = same(best_state(root), expected)
        except Exception as exc:  # reported, and the test fails on it
            entry["ok"], entry["error"] = False, f"{type(exc).__name__}: {exc}"
        results.append(entry)
        shutil.rmtree(root)
    return {"scenario": scenario, "operations": total, "results": results}


def enospc_best(work: Path) -> dict[str, Any]:
    scenario = "plain-e1"
    reference = prepared(work, "reference", scenario)
    target(reference, scenario)
    expected = best_state(reference)
    root = prepared(work, "full", scenario)
    import nnx._persistence.resume_point as resume_point

    write = resume_point.atomic_write_bytes
    failed: list[str] = []
    seen: list[str] = []

    def full_disk(path: Any, data: bytes, **kwargs: Any) -> Any:
        if Path(path).name == "best.pt":
            seen.append(os.fspath(path))
        if not failed and len(seen) == 2:  # epoch 1's BEST: epoch 0 wrote the first
            failed.append(Path(path).name)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), os.fspath(path))
        return write(path, data, **kwargs)

    resume_point.atomic_write_bytes = full_disk  # type: ignore[assignment]
    try:
        target(root, scenario)
        raised = None
    except OSError as exc:
        raised = exc.errno
    finally:
        resume_point.atomic_write_bytes = write  # type: ignore[assignment]
    steps = recover(root, scenario)
    return {"scenario": "enospc-best", "failed_file": failed, "raised": raised,
            "steps": steps, "ok": same(best_state(root), expected)}


def copy(template: Path, dest: Path) -> Path:
    shutil.copytree(template, dest, symlinks=True)
    return dest


if __name__ == "__main__":
    scenario, workdir = sys.argv[1], Path(sys.argv[2])
    SYNC = scenario.endswith("-sync")
    scenario = scenario.removesuffix("-sync")
    report = enospc_best(workdir) if scenario == "enospc-best" else crash_points(scenario, workdir)
    print(json.dumps({**report, "sync": SYNC}))
