"""``nnx runs verify`` agrees with ``NNRun.load`` and ``nnx runs list`` (issue 36 item 6).

An empty reservation, which ``runs list`` shows as ``incomplete`` (no damage), is
reported as such, not as "no run"; a run ``NNRun.load`` refuses as damaged (a history
cut short of LAST) fails verify naming the file, as list and show do; and
``iter_history`` refuses a string that is neither a run id nor a run directory
instead of reading it as a run without records.
"""

from __future__ import annotations

import contextlib
import io
import shutil

import pytest
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from _support.disk import tree

from nnx import NNRun, NNTrainParams
from nnx._persistence.run_damage import RunDamagedError
from nnx.cli import main
from nnx.history import iter_history


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands here
    return tmp_path


def train():
    params = NNTrainParams(n_epochs=2, train_loader=tiny_batches(), scheduler=None,
                           optim=sgd())
    return tiny_model(hidden=7).train(params, verbose=False)


def cli(*argv: str) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(out):
        code = main(list(argv))
    return code, out.getvalue()


@pytest.mark.parametrize("checkpoints_made", [False, True])
def test_verify_reports_an_empty_reservation_as_incomplete_like_list(in_tmp,
                                                                     checkpoints_made):
    run = train()
    shutil.rmtree(run.path)
    run.path.mkdir()  # what FitLoop._reserve leaves when killed before run.yaml
    (run.path / ".history-committed-by-last").write_bytes(b"")
    if checkpoints_made:
        (run.path / "checkpoints").mkdir()
    code, listed = cli("runs", "list")
    assert code == 0 and "incomplete" in listed
    before = tree(in_tmp)
    code, out = cli("runs", "verify", run.id)
    assert code == 0, out
    assert f"run {run.id} is incomplete: an empty reservation" in out and "no run" not in out
    assert tree(in_tmp) == before


def test_verify_fails_a_run_whose_history_is_cut_like_load_and_list(in_tmp):
    run = train()
    history = run.path / "idps.csv"
    lines = history.read_text().splitlines(keepends=True)
    history.write_text("".join(lines[:-2]))  # epoch 1's records gone, LAST commits them
    with pytest.raises(RunDamagedError, match=r"idps\.csv"):
        NNRun.load(run.id)
    code, listed = cli("runs", "list")
    assert code == 1 and "damaged" in listed
    before = tree(in_tmp)
    code, out = cli("runs", "verify", run.id)
    assert code == 1, out
    assert f"FAIL run  RunDamagedError: run {run.id} is damaged: runs/{run.id}/idps.csv" in out
    assert "ok  last" in out  # the points themselves still verify
    assert tree(in_tmp) == before


@pytest.mark.parametrize("exists", [True, False])
def test_iter_history_refuses_a_string_that_is_no_run_id_nor_run_directory(in_tmp, exists):
    train()
    if exists:
        (in_tmp.parent / "x").mkdir(exist_ok=True)  # a directory, but no run
    with pytest.raises(ValueError, match=r"is not a run id: '\.\./x'"):
        list(iter_history("../x"))


def test_iter_history_still_reads_a_run_directory_given_by_path(in_tmp):
    run = train()
    assert len(list(iter_history(f"runs/{run.id}"))) == len(list(iter_history(run.id))) == 4
