"""Two processes, one run id (spec §4.1): exactly one trains, the other gets the lease error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

SCRIPT = textwrap.dedent("""
    import sys, time, pathlib, torch
    from nnx import Callback, NNModel, NNParams, NNTrainParams, RunLeaseError
    root, role = pathlib.Path(sys.argv[1]), sys.argv[2]
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(8, 3, generator=g), torch.randint(0, 2, (8,), generator=g))]

    class Slow(Callback):
        def on_train_begin(self, ctx):
            (root.parent / "started").write_text(ctx.run.id)
        def on_epoch_end(self, ctx):
            deadline = time.monotonic() + 90  # hold the lease until the test releases it
            while not (root.parent / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.05)

    model = NNModel(net_params=NNParams(input_dim=3, output_dim=2))
    params = NNTrainParams(n_epochs=6, train_loader=batches, val_loader=batches)
    try:
        run = model.train(params, callbacks=[Slow()] if role == "first" else [],
                          verbose=False, root=root)
        print("TRAINED", run.id)
    except RunLeaseError as exc:
        print("LEASE", exc)
""")


@pytest.mark.slow
def test_a_second_process_on_the_same_run_gets_the_lease_error(tmp_path):
    root = tmp_path / "runs"
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    first = subprocess.Popen([sys.executable, str(script), str(root), "first"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "started").exists():
        assert first.poll() is None, first.communicate()
        assert time.monotonic() < deadline, "the first process never started training"
        time.sleep(0.05)
    second = subprocess.run([sys.executable, str(script), str(root), "second"],
                            capture_output=True, text=True, timeout=120)
    (tmp_path / "release").write_text("")
    out_first, err_first = first.communicate(timeout=120)
    run_id = (tmp_path / "started").read_text()
    assert f"TRAINED {run_id}" in out_first, err_first
    assert second.stdout.startswith("LEASE") and "being trained by another process" in (
        second.stdout), second.stderr
    runs = [p.name for p in root.iterdir() if not p.name.startswith(".") and p.name != "best"]
    assert runs == [run_id]
    assert (root / "best").resolve().name == run_id  # the pointer is consistent afterwards


OVERWRITE = textwrap.dedent("""
    import os, sys, pathlib, torch
    from nnx import NNEvaluationDataPoint, NNModel, NNParams, NNTrainParams
    from nnx._foundation.locking import file_lock
    from nnx._persistence.best import elect_best
    root, role, rounds = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(8, 3, generator=g), torch.randint(0, 2, (8,), generator=g))]

    def train(error, salt, overwrite=False):
        torch.manual_seed(0)
        model = NNModel(net_params=NNParams(input_dim=3, output_dim=2))
        params = NNTrainParams(n_epochs=1, train_loader=batches, val_loader=batches,
                               scheduler=None, overwrite_existing=overwrite)
        scripted = lambda ctx: NNEvaluationDataPoint(error=error, loss=1.0)  # noqa: E731
        run = model.train(params, eval_step_fn=scripted, salt=salt, verbose=False, root=root)
        # Old artifacts worth deleting: a real run with many files takes a while to remove.
        junk = run.path / "junk"
        junk.mkdir()
        for i in range(2000):
            (junk / str(i)).write_bytes(b"")
        return run

    if role == "setup":
        print("OWNER", train(0.1, "owner").id)
        print("OTHER", train(0.5, "other").id)
    elif role == "overwrite":
        for _ in range(rounds):
            train(0.1, "owner", overwrite=True)
    else:  # another run's commits: a full election under .best.lock, over and over
        done = root.parent / "done"
        while not done.exists():
            with file_lock(root / ".best.lock"):
                elect_best(root)
""")


@pytest.mark.slow
def test_the_pointer_never_dangles_while_its_owner_is_overwritten(tmp_path):
    """§4.1: one process overwrites the run that owns runs/best (a few times), another
    elects under .best.lock over and over (what other runs' commits do), and this
    process reads the pointer in a tight loop: it never dangles and never names a run
    without a committed BEST."""
    root = tmp_path / "runs"
    script = tmp_path / "overwrite.py"
    script.write_text(OVERWRITE)
    setup = subprocess.run([sys.executable, str(script), str(root), "setup", "0"],
                           capture_output=True, text=True, timeout=120)
    ids = dict(line.split() for line in setup.stdout.splitlines()
               if line.startswith(("OWNER ", "OTHER ")))
    assert set(ids) == {"OWNER", "OTHER"}, setup.stderr
    assert (root / "best").resolve().name == ids["OWNER"]
    elector = subprocess.Popen([sys.executable, str(script), str(root), "elect", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    writer = subprocess.Popen([sys.executable, str(script), str(root), "overwrite", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    best, bad, reads = root / "best", [], 0
    while writer.poll() is None:
        reads += 1
        if os.path.islink(best) and not (os.path.isfile(best / "checkpoints" / "best.pt")
                                         and os.path.isfile(best / "run.yaml")):
            bad.append(os.readlink(best) if os.path.islink(best) else None)
    (tmp_path / "done").write_text("")
    _, err_writer = writer.communicate(timeout=120)
    _, err_elector = elector.communicate(timeout=120)
    assert writer.returncode == 0, err_writer
    assert elector.returncode == 0, err_elector
    assert reads > 0
    assert bad == [], f"runs/best named a run without a committed BEST {len(bad)} times"
    assert (root / "best").resolve().name in ids.values()
    assert not [p.name for p in root.iterdir() if ".overwritten." in p.name]
