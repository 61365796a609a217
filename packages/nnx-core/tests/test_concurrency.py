"""Two processes, one run id (spec §4.1): exactly one trains, the other gets the lease error."""

from __future__ import annotations

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
