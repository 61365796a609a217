"""``nnx runs list`` / ``show`` on a real nnx-lm run beside a core run (issue 26 item 3).

tests/data/add_on_runs holds both, written by real training in the workspace
(its regenerate.py). In the workspace venv nnx-lm reads the LM run as usual; in the
nnx-core-only venv of tools/check_alacarte.py the same test sees it as an add-on's
run: listed, and shown with its net and the distribution that reads it.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from nnx import NNRun
from nnx.cli import main

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "add_on_runs"
HAS_LM = importlib.util.find_spec("nnx.lm") is not None


def _ids() -> tuple[str, str]:
    """(the LM run's id, the core run's id)."""
    runs = sorted(p for p in FIXTURE.iterdir() if (p / "run.yaml").is_file())
    lm = [p.name for p in runs if "net: TRANSFORMER" in (p / "run.yaml").read_text()]
    core = [p.name for p in runs if p.name not in lm]
    assert len(lm) == 1 and len(core) == 1, runs
    return lm[0], core[0]


@pytest.fixture
def root(tmp_path) -> Path:
    shutil.copytree(FIXTURE, tmp_path / "runs", ignore=shutil.ignore_patterns("*.py"))
    return tmp_path / "runs"


def test_list_and_show_read_an_lm_run_and_a_core_run(root, capsys):
    lm, core = _ids()
    assert main(["runs", "list", "--root", str(root)]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert set(rows) == {lm, core}
    net = "TRANSFORMER" if HAS_LM else "TRANSFORMER (needs nnx-lm)"
    assert f"  {net}  " in rows[lm]
    assert " committed " in rows[lm] and " committed " in rows[core]
    assert " FEED_FWD " in rows[core]

    assert main(["runs", "show", lm, "--root", str(root)]) == 0
    shown = capsys.readouterr().out.splitlines()
    assert shown[1] == ("       net: TRANSFORMER" if HAS_LM else
                        "       net: TRANSFORMER (needs nnx-lm: pip install nnx-lm)")
    assert any(line.startswith("      best: epoch 0 (train loss ") for line in shown)
    assert shown[-1].split()[0] == "0"  # the one epoch's row
    assert main(["runs", "show", core, "--root", str(root)]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "       net: FEED_FWD"


@pytest.mark.skipif(not HAS_LM, reason="the fixture's freshness is checked where nnx-lm is")
def test_the_fixture_still_loads_as_runs_of_this_nnx(root):
    # A changed run format or run id makes these stale: run regenerate.py beside them.
    for run_id in _ids():
        assert NNRun.load(run_id, root=root).id == run_id
