"""Several processes on one stored study share its budget (SQLite RDB and journal file).

Each worker is a real process; one is SIGKILLed inside a trial's fit. Kept small: tiny
one-epoch plans, a 1 s heartbeat.
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


def _worker(tmp_path: Path, kind: str, trials: int, hang_at: int = 0,
            marker: str = "-") -> subprocess.Popen:
    path = tmp_path / ("study.db" if kind == "sqlite" else "journal.log")
    # The database's schema is created once, before the workers start (as docs/search.md
    # says): Optuna's schema set-up is not safe against several first connections at
    # once. The study itself is created by whichever worker comes first.
    storage(kind, str(path))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get(
        "PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, str(HERE / "_search_worker.py"), kind, str(path), "w", str(trials),
         str(hang_at), marker], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
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


def _study(tmp_path: Path, kind: str) -> optuna.Study:
    path = tmp_path / ("study.db" if kind == "sqlite" else "journal.log")
    return optuna.load_study(study_name="w", storage=storage(kind, str(path)))


def _counted(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.trials if t.state != TrialState.WAITING
            and not t.user_attrs.get("nnx.search.unrun")]


def test_a_study_killed_mid_trial_reopens_and_counts_the_orphan(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "in-trial"
    _kill_when_in_trial(_worker(tmp_path, "sqlite", 4, hang_at=2, marker=str(marker)), marker)
    study = _study(tmp_path, "sqlite")
    assert [t.state for t in study.trials] == [TrialState.COMPLETE, TrialState.RUNNING]
    result = search(make_plan(epochs=1), {"lr": FloatDistribution(0.01, 0.3, log=True)},
                    apply=with_lr, budget=SearchBudget(trials=4), study_name="w",
                    storage=storage("sqlite", str(tmp_path / "study.db")))
    assert [o.number for o in result.outcomes] == [2, 3]  # the orphan (1) counted, once
    assert result.counted == 4 and result.stop_reason == "budget"
    trials = _study(tmp_path, "sqlite").trials
    assert len(trials) == 4 and trials[1].state in (TrialState.RUNNING, TrialState.FAIL)


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_three_workers_share_one_budget(tmp_path, kind) -> None:
    workers = [_worker(tmp_path, kind, 12) for _ in range(3)]
    outcomes = [o for w in workers for o in _finish(w)]
    study = _study(tmp_path, kind)
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


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_worker_killed_mid_trial_leaves_its_trial_counted_once(tmp_path, kind) -> None:
    marker = tmp_path / "in-trial"
    doomed = _worker(tmp_path, kind, 12, hang_at=1, marker=str(marker))
    _kill_when_in_trial(doomed, marker)
    others = [_worker(tmp_path, kind, 12) for _ in range(2)]
    outcomes = [o for w in others for o in _finish(w)]
    counted = _counted(_study(tmp_path, kind))
    assert len(counted) == 12 and len(outcomes) == 11
    orphans = [t for t in counted if t.state != TrialState.COMPLETE]
    assert len(orphans) == 1 and orphans[0].state in (TrialState.RUNNING, TrialState.FAIL)
    assert orphans[0].number not in {o["number"] for o in outcomes}
    assert len({o["run_id"] for o in outcomes}) == 11
