"""The listing summary (summary.json) and ``nnx runs list`` from it without torch
(issue 31; docs/durability.md, "The listing summary")."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import Callback, EarlyStopping, MonitorSpec, NNTrainParams
from nnx.cli import main
from nnx.history import HistoryJournal

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "add_on_runs"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    return tmp_path


def params(n_epochs=3, **changes):
    return NNTrainParams(n_epochs=n_epochs, train_loader=tiny_batches(),
                         val_loader=tiny_batches(seed=1), scheduler=None, optim=sgd(),
                         **changes)


def listing(capsys) -> tuple[str, str]:
    capsys.readouterr()
    main(["runs", "list"])
    captured = capsys.readouterr()
    return captured.out, captured.err


def summary(run_id: str) -> dict:
    return json.loads((Path("runs") / run_id / "summary.json").read_text())


def drop_summaries() -> None:
    for path in Path("runs").glob("*/summary.json"):
        path.unlink()


def some_runs() -> list[str]:
    plain = tiny_model().train(params(data_id="d1"), salt="s1", verbose=False)
    monitored = tiny_model().train(params(monitor=MonitorSpec(metric="loss", split="val")),
                                   verbose=False)
    stopped = tiny_model().train(params(), salt="early", verbose=False,
                                 callbacks=[EarlyStopping(patience=0)])
    return [plain.id, monitored.id, stopped.id]


def test_summary_path_and_full_path_list_identically_and_the_full_path_notes_it(capsys):
    ids = some_runs()
    fast, fast_err = listing(capsys)
    assert all(run_id in fast for run_id in ids) and "checkpoints" not in fast_err
    drop_summaries()  # as runs written before summaries
    full, full_err = listing(capsys)
    assert full == fast
    assert "3 runs listed from their checkpoints" in full_err


def cli_in_a_fresh_interpreter(cwd, *args: str) -> tuple[str, list[str]]:
    """The command's output and, as its last line, which of torch and numpy it loaded."""
    code = (f"import sys; from nnx.cli import main; main({list(args)!r}); "
            "print('torch' in sys.modules, 'numpy' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True,
                          text=True, check=True)
    return done.stdout + done.stderr, done.stdout.splitlines()[-1].split()


def test_runs_list_imports_no_torch(in_tmp):
    tiny_model().train(params(2), verbose=False)
    out, loaded = cli_in_a_fresh_interpreter(in_tmp, "runs", "list")
    assert loaded == ["False", "False"], out
    assert "FEED_FWD" in out


def test_runs_show_imports_no_torch(in_tmp):
    # Issue 37: a run with a trusted summary is shown from it (LAST's mark, BEST's row);
    # the typed configuration it renders resolves no torch class.
    run = tiny_model().train(params(2, monitor=MonitorSpec(metric="loss", split="val")),
                             verbose=False)
    out, loaded = cli_in_a_fresh_interpreter(in_tmp, "runs", "show", run.id)
    assert loaded[0] == "False", out
    assert "best: epoch" in out


def test_runs_show_from_the_summary_and_from_the_checkpoints_read_the_same(capsys):
    ids = some_runs()

    def shown() -> list[str]:
        out = []
        for run_id in ids:
            assert main(["runs", "show", run_id]) == 0
            out.append(capsys.readouterr().out)
        return out

    fast = shown()
    drop_summaries()  # as runs written before summaries: BEST and LAST are opened
    assert shown() == fast
    assert all("best: epoch" in text for text in fast)


class Snap(Callback):
    """Records the summary's epoch as each epoch starts (after the previous commit)."""

    def __init__(self):
        self.seen = []

    def on_epoch_begin(self, ctx):
        path = ctx.run.path / "summary.json"
        self.seen.append(json.loads(path.read_text())["body"]["epoch"]
                         if path.exists() else None)


def test_each_commit_rewrites_the_summary():
    snap = Snap()  # the synchronous commit: each epoch starts after the previous is written
    run = tiny_model().train(replace(params(3), async_commit=False), verbose=False,
                             callbacks=[snap])
    assert snap.seen == [None, 0, 1]
    assert summary(run.id)["body"]["epoch"] == 2


class DeferredSnap(Callback):
    """Records the summary's epoch where a callback reads committed files: in an action
    deferred to the end of the epoch's commit (the background commit included)."""

    def __init__(self):
        self.seen = []

    def on_epoch_end(self, ctx):
        ctx.defer(lambda c: self.seen.append(
            json.loads((c.run.path / "summary.json").read_text())["body"]["epoch"]))


def test_each_background_commit_rewrites_the_summary_before_deferred_actions_run():
    snap = DeferredSnap()
    run = tiny_model().train(params(3), verbose=False, callbacks=[snap])
    assert snap.seen == [0, 1, 2]
    assert summary(run.id)["body"]["epoch"] == 2


def test_a_tampered_or_stale_summary_is_ignored(capsys):
    run = tiny_model().train(params(2), verbose=False)
    right, _ = listing(capsys)
    path = Path("runs") / run.id / "summary.json"
    doc = json.loads(path.read_text())
    forged = json.loads(json.dumps(doc))
    forged["body"]["epoch"] = 0  # the digest no longer verifies
    path.write_text(json.dumps(forged))
    out, err = listing(capsys)
    assert out == right
    assert "(1 run listed from their checkpoints: 1 whose summary no longer matches" in err
    from nnx._foundation.hashing import canonical_bytes, sha256_hex

    path.write_bytes(canonical_bytes(doc))  # the original, rewritten: trusted again
    assert listing(capsys) == (right, "")
    stale = json.loads(json.dumps(doc))
    stale["body"]["last"][0] -= 1  # a generation behind LAST's, with a digest that verifies
    stale["sha256"] = sha256_hex(canonical_bytes(stale["body"]))
    path.write_bytes(canonical_bytes(stale))  # as the writer writes it
    out, err = listing(capsys)
    assert out == right and "1 run listed from their checkpoints" in err


def test_a_stranded_summary_temp_is_a_leftover_that_repair_removes(capsys):
    run = tiny_model().train(params(1), verbose=False)
    temp = Path("runs") / run.id / ".summary.json.0123abcd"
    temp.write_text("{}")
    assert main(["runs", "verify", run.id]) == 0
    assert ".summary.json.0123abcd" in capsys.readouterr().out
    main(["runs", "verify", run.id, "--repair"])
    assert not temp.exists()


def test_old_runs_without_a_summary_still_list(capsys, in_tmp):
    shutil.copytree(FIXTURE, in_tmp / "runs", ignore=shutil.ignore_patterns("*.py"))
    assert not list((in_tmp / "runs").glob("*/summary.json"))
    out, err = listing(capsys)
    ids = [p.name for p in (in_tmp / "runs").iterdir() if (p / "run.yaml").is_file()]
    assert all(run_id in out for run_id in ids)
    assert (f"({len(ids)} runs listed from their checkpoints: {len(ids)} without a listing "
            "summary (written before summaries);") in err


def test_a_journal_run_lists_through_its_summary_as_through_its_checkpoints(capsys):
    run = tiny_model().train(params(3), verbose=False,
                             history=HistoryJournal(retention=2, chunk_size=2))
    assert (run.path / "summary.json").is_file()
    fast, fast_err = listing(capsys)
    assert run.id in fast and "checkpoints" not in fast_err
    drop_summaries()
    full, full_err = listing(capsys)
    assert full == fast and "1 run listed from their checkpoints" in full_err


def test_an_empty_reservation_and_best_s_fallback_directory_need_no_torch(in_tmp):
    # Neither is a run to read from its checkpoints: listing them must stay torch-free.
    run = tiny_model().train(params(2), verbose=False)
    pointer = in_tmp / "runs" / "best"
    if pointer.is_symlink():
        pointer.unlink()
    else:
        shutil.rmtree(pointer)
    pointer.mkdir()  # the fallback where symlinks are unavailable: POINTER.txt only
    (pointer / "POINTER.txt").write_text(run.id, encoding="utf-8")
    reserved = in_tmp / "runs" / ("0" * 32)
    (reserved / "checkpoints").mkdir(parents=True)
    (reserved / ".history-committed-by-last").write_bytes(b"")
    code = ("import sys; from nnx.cli import main; rc = main(['runs', 'list']); "
            "print(rc, 'torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], cwd=in_tmp, capture_output=True,
                          text=True, check=True)
    lines = done.stdout.splitlines()
    assert lines[-1] == "0 False", done.stdout + done.stderr
    assert any(line.startswith("0" * 32) and "incomplete" in line for line in lines)
    assert any(line.startswith(run.id) and line.rstrip().endswith("*") for line in lines)
    assert not any(line.startswith("best ") for line in lines)
    assert "checkpoints" not in done.stderr


def test_a_run_yaml_changed_after_the_summary_is_checked_the_full_way(capsys):
    # The summary records run.yaml's bytes as its commit checked them; other bytes are
    # parsed and hashed by the full path, which names a run.yaml of another run.
    run = tiny_model().train(params(1), verbose=False)
    path = Path("runs") / run.id / "run.yaml"
    path.write_text(path.read_text().replace("n_epochs: 1", "n_epochs: 9"))
    capsys.readouterr()
    assert main(["runs", "list"]) == 1
    captured = capsys.readouterr()
    # The full path named it; its damaged row says why it was read that way, no note.
    assert "damaged" in captured.out and "listed from their checkpoints" not in captured.err


def test_the_history_the_commit_recorded_is_not_read_again_and_a_changed_one_is(
        capsys, monkeypatch):
    # The summary records idps.csv as its commit left it (inode, size, time): the listing
    # then skips reading the history's ends; a history torn since is read and named.
    import nnx._persistence.run_rows as run_rows

    run = tiny_model().train(params(2), verbose=False)
    assert summary(run.id)["body"]["history"] is not None
    read = []
    original = run_rows.check_history_ends
    monkeypatch.setattr(run_rows, "check_history_ends",
                        lambda *a, **k: (read.append(1), original(*a, **k))[1])
    out, err = listing(capsys)
    assert run.id in out and "damaged" not in out and not read and not err
    csv = Path("runs") / run.id / "idps.csv"
    header = len(csv.read_bytes().split(b"\n", 1)[0]) + 1
    with csv.open("r+b") as handle:  # cut back to its header in place: same file, shorter
        handle.truncate(header)
    capsys.readouterr()
    assert main(["runs", "list"]) == 1
    captured = capsys.readouterr()
    assert read and "damaged" in captured.out
