"""Several processes on one stored study share its budget: SQLite and PostgreSQL RDB
storages (both with a 1 s heartbeat) and a journal file.

Each worker is a real process; one is SIGKILLed inside a trial's fit, once its run
exists. The PostgreSQL cases run on a throwaway local cluster (conftest.py), the
storage several machines would share. Kept small: tiny one-epoch plans.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
from _search_data import make_plan, with_lr
from _search_worker import storage
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState

from nnx.extend import canonical_bytes, sha256_hex
from nnx.search import SearchBudget, search

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.slow
HEARTBEAT = ("sqlite", "postgresql")  # the worker's RDB storages carry a heartbeat
# Seconds a worker's heartbeat may lag before another fails its trial as stale: wide where
# every worker lives, so one starved of CPU on a loaded machine is never taken for dead;
# shorter where a killed worker's orphan must be found, but still several heartbeats.
LIVE_GRACE = 120
ORPHAN_GRACE = 10


@pytest.fixture
def where(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> str:
    """The study's storage for ``kind``: a file in tmp_path, or a fresh PostgreSQL
    database's URL."""
    if kind == "postgresql":
        return str(request.getfixturevalue("postgres_cluster").new_database())
    return str(tmp_path / ("study.db" if kind == "sqlite" else "journal.log"))


def _worker(tmp_path: Path, kind: str, where: str, trials: int, hang_at: int = 0,
            marker: str = "-", grace: int = 2) -> subprocess.Popen:
    # The database's schema is created once, before the workers start (as docs/search.md
    # says): Optuna's schema set-up is not safe against several first connections at
    # once. The study itself is created by whichever worker comes first.
    storage(kind, where)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get(
        "PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, str(HERE / "_search_worker.py"), kind, where, "w", str(trials),
         str(hang_at), marker, str(grace)], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True)


def _kill_when_in_trial(proc: subprocess.Popen, marker: Path) -> None:
    deadline = time.monotonic() + 120
    while not marker.exists():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "the worker never reached its trial"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def _finish(proc: subprocess.Popen) -> list[dict]:
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err[-3000:]
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def _study(kind: str, where: str) -> optuna.Study:
    return optuna.load_study(study_name="w", storage=storage(kind, where))


def _counted(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.trials if t.state != TrialState.WAITING
            and not t.user_attrs.get("nnx.search.unrun")]


def _links_its_run(tmp_path: Path, study: optuna.Study, orphan: optuna.trial.FrozenTrial
                   ) -> None:
    """The orphan keeps its attempt id and the id of the run it was training."""
    token = study.user_attrs["nnx.search"]["token"]
    assert orphan.user_attrs["nnx.search.attempt_id"] == sha256_hex(canonical_bytes(
        {"study": token, "trial": orphan.number}))[:32]
    assert (tmp_path / "runs" / orphan.user_attrs["nnx.search.run_id"]).is_dir()


def _killed_then_reopened(tmp_path: Path, kind: str, where: str, *, trials: int,
                          hang_at: int):
    """One worker killed in its ``hang_at``-th trial (left running), then a search in
    this process on the same study and budget."""
    marker = tmp_path / "in-trial"
    _kill_when_in_trial(_worker(tmp_path, kind, where, trials, hang_at=hang_at,
                                marker=str(marker)), marker)
    states = [t.state for t in _study(kind, where).trials]
    assert states == [TrialState.COMPLETE] * (hang_at - 1) + [TrialState.RUNNING]
    return search(make_plan(epochs=1), {"lr": FloatDistribution(0.01, 0.3, log=True)},
                  apply=with_lr, budget=SearchBudget(trials=trials), study_name="w",
                  storage=storage(kind, where))


@pytest.mark.parametrize("kind", HEARTBEAT)
def test_a_study_killed_mid_trial_reopens_and_fails_the_orphan(tmp_path, monkeypatch, kind,
                                                               where) -> None:
    monkeypatch.chdir(tmp_path)
    result = _killed_then_reopened(tmp_path, kind, where, trials=4, hang_at=2)
    assert [o.number for o in result.outcomes] == [2, 3]  # the orphan (1) counted, once
    assert result.counted == 4 and result.stop_reason == "budget"
    study = _study(kind, where)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.FAIL,
                                               TrialState.COMPLETE, TrialState.COMPLETE]
    _links_its_run(tmp_path, study, study.trials[1])


@pytest.mark.parametrize("kind", HEARTBEAT)
def test_an_orphan_that_is_the_studys_last_trial_ends_failed(tmp_path, monkeypatch, kind,
                                                             where) -> None:
    # The budget is spent with the orphan counted, so no worker starts another trial (the
    # moment Optuna fails stale trials): the worker that finds the study done fails it.
    monkeypatch.chdir(tmp_path)
    result = _killed_then_reopened(tmp_path, kind, where, trials=3, hang_at=3)
    assert result.outcomes == () and result.stop_reason == "budget" and result.counted == 3
    study = _study(kind, where)
    assert [t.state for t in study.trials] == [TrialState.COMPLETE] * 2 + [TrialState.FAIL]
    _links_its_run(tmp_path, study, study.trials[2])


@pytest.mark.parametrize("kind", ["sqlite", "journal", "postgresql"])
def test_three_workers_share_one_budget(tmp_path, kind, where) -> None:
    workers = [_worker(tmp_path, kind, where, 12, grace=LIVE_GRACE) for _ in range(3)]
    outcomes = [o for w in workers for o in _finish(w)]
    study = _study(kind, where)
    counted = _counted(study)
    assert len(counted) == 12 and all(t.state == TrialState.COMPLETE for t in counted)
    assert sorted(o["number"] for o in outcomes) == sorted(t.number for t in counted)
    run_ids = [o["run_id"] for o in outcomes]
    assert len(run_ids) == 12 and len(set(run_ids)) == 12
    assert all((tmp_path / "runs" / r / "run.yaml").is_file() for r in run_ids)
    # the attempt (so the run id) is a function of the study and the trial number alone
    token = study.user_attrs["nnx.search"]["token"]
    for o in outcomes:
        assert o["attempt_id"] == sha256_hex(canonical_bytes(
            {"study": token, "trial": o["number"]}))[:32]


@pytest.mark.parametrize("kind", ["sqlite", "journal", "postgresql"])
def test_a_worker_killed_mid_trial_leaves_its_trial_counted_once(tmp_path, kind,
                                                                 where) -> None:
    marker = tmp_path / "in-trial"
    doomed = _worker(tmp_path, kind, where, 12, hang_at=1, marker=str(marker))
    _kill_when_in_trial(doomed, marker)
    others = [_worker(tmp_path, kind, where, 12, grace=ORPHAN_GRACE) for _ in range(2)]
    outcomes = [o for w in others for o in _finish(w)]
    study = _study(kind, where)
    counted = _counted(study)
    assert len(counted) == 12 and len(outcomes) == 11
    (orphan,) = [t for t in counted if t.state != TrialState.COMPLETE]
    # Failed by the other workers where the storage has a heartbeat; without one a dead
    # worker cannot be told from a slow one, and its trial stays running (counted once).
    assert orphan.state == (TrialState.FAIL if kind in HEARTBEAT else TrialState.RUNNING)
    assert orphan.number not in {o["number"] for o in outcomes}
    assert len({o["run_id"] for o in outcomes}) == 11
    _links_its_run(tmp_path, study, orphan)
