"""nnx.example_tool, the tool-over-runs half of the template: summarize_run reads a run
through nnx-core's run-document readers (never by key) and returns a RunSummary; every
argument is checked before a file is read; importing it loads no torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("nnx.example_tool", reason="nnx-example-plugin is not installed")

from nnx.example_tool import RunSummary, RunSummaryError, summarize_run
from nnx.testing import tiny_batches, tiny_model, tiny_train_params


def test_it_summarizes_what_the_run_recorded(tmp_path: Path) -> None:
    run = tiny_model().train(tiny_train_params(n_epochs=2, seed=5, val_loader=tiny_batches()),
                             root=tmp_path, verbose=False)
    summary = summarize_run(run.id, root=tmp_path)
    assert isinstance(summary, RunSummary)
    assert (summary.run_id, summary.seed, summary.parent_run_id) == (run.id, 5, None)
    records = run.epoch_records()
    assert len(records) == 2 and summary.epochs == tuple(r.epoch for r in records)
    expected = tuple(None if r.val_edp is None else r.val_edp.loss for r in records)
    assert None not in expected
    assert summary.values == expected and summary.last == expected[-1]
    assert summary.text().startswith(f"run {run.id} (seed 5)\n  epoch ")
    assert summary.state()["values"] == list(expected)


@pytest.mark.parametrize(("run_id", "metric", "named"), [
    ("../etc", "loss", "run_id"), ("a" * 32, "", "metric"), ("a" * 32, None, "metric")])
def test_arguments_are_refused_before_any_file_is_read(tmp_path: Path, run_id: str,
                                                       metric: str | None, named: str) -> None:
    with pytest.raises(ValueError, match=named) as caught:
        summarize_run(run_id, metric=metric, root=tmp_path / "absent")  # type: ignore[arg-type]
    assert not isinstance(caught.value, RunSummaryError)


def test_a_missing_or_damaged_run_is_a_run_summary_error(tmp_path: Path) -> None:
    with pytest.raises(RunSummaryError, match="no run"):
        summarize_run("a" * 32, root=tmp_path)
    (tmp_path / ("b" * 32)).mkdir()
    (tmp_path / ("b" * 32) / "run.yaml").write_text("[1, 2]\n")
    with pytest.raises(RunSummaryError, match="cannot be read"):
        summarize_run("b" * 32, root=tmp_path)


def test_importing_the_tool_loads_no_torch() -> None:
    code = "import sys, nnx.example_tool; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"
