"""A crash anywhere in an epoch's commit never loses BEST (issue 24; docs/durability.md,
"The epoch transaction").

For every file-system operation of one epoch's commit, counted at the ``os`` level, a
child is killed right before it (``_support/commit_crash_points.py`` describes the
harness). After ``nnx runs verify --repair`` and, when LAST is short of the plan, a
planned resume (or a retry when nothing committed), the BEST runs/best leads to equals
the uninterrupted run's BEST bit for bit, and that one repair pass leaves no leftover
(issue 36): for a plain run (epoch 0's commit, which owes
FIRST and BEST, and epoch 1's, which owes BEST and a runs/best hand-over), a
history-journal run and a resumed run; and after an ENOSPC on ``best.pt``. Each with the
default background commit (issue 38: the staging's operations in the training thread and
the writer's in its thread are the kill points) and with ``async_commit=False``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = Path(__file__).parent.parent / "_support" / "commit_crash_points.py"


def _drive(scenario: str, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(DRIVER), scenario, str(work)], env=env,
                          capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@pytest.mark.parametrize("commit", ["", "-sync"], ids=["background", "sync"])
@pytest.mark.parametrize("scenario", ["plain-e0", "plain-e1", "journal-e1", "resumed-e1"])
def test_a_kill_before_any_operation_of_a_commit_keeps_the_runs_best_best(tmp_path, scenario,
                                                                           commit):
    report = _drive(scenario + commit, tmp_path)
    assert report["sync"] is (commit == "-sync")
    results = report["results"]
    assert report["operations"] >= 20  # history, LAST, the points it owes, the hand-over
    assert len(results) == report["operations"]
    assert all(r["rc"] == 137 for r in results)  # every child was cut where it was told
    failed = [r for r in results if not r["ok"]]
    assert failed == [], failed
    # One `nnx runs verify --repair` pass leaves nothing a second would remove: no
    # runs/best temp in the root, no temp, staged manifest or orphan sidecar in a run.
    left = [(r["at"], r["left"]) for r in results if r["left"]]
    assert left == [], left
    # Some kills land after LAST (repaired from it), some before (a resume retrains).
    steps = {tuple(r["steps"]) for r in results}
    assert ("repair",) in steps or ("repair", "resume") in steps
    assert len(steps) >= 2


@pytest.mark.slow
@pytest.mark.parametrize("commit", ["", "-sync"], ids=["background", "sync"])
def test_a_full_disk_on_best_pt_is_repaired_from_last(tmp_path, commit):
    report = _drive("enospc-best" + commit, tmp_path)
    assert report["sync"] is (commit == "-sync")
    assert report["failed_file"] == ["best.pt"] and report["raised"] == 28  # ENOSPC
    assert report["steps"] == ["repair"]  # LAST committed epoch 1: --repair wrote BEST
    assert report["ok"]
