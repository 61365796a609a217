"""NNRun.chart, ``nnx runs show --plot`` and ``nnx runs report`` reach nnx-viz only on
call (spec §6.4; core never imports an add-on at import time): without it, the one
install hint, before any file is written. The absence is simulated as for the other
add-ons; nnx-viz's own tests check the chart and the report it draws."""

from __future__ import annotations

import sys

import pytest
from _nnx_core_tiny import tiny_model, tiny_train_params

from nnx import MissingDistributionError
from nnx.cli import main


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    # What an uninstalled nnx-viz looks like (its nnx.vis_utils is not importable).
    monkeypatch.setitem(sys.modules, "nnx.vis_utils", None)
    return tmp_path


def test_nnrun_chart_without_nnx_viz_is_the_install_hint(tmp_path):
    run = tiny_model().train(tiny_train_params(n_epochs=1), verbose=False)
    with pytest.raises(MissingDistributionError, match="pip install nnx-viz") as caught:
        run.chart(tmp_path / "chart.html")
    assert "NNRun.chart" in str(caught.value)
    assert not (tmp_path / "chart.html").exists()


def test_runs_show_plot_without_nnx_viz_is_the_install_hint(tmp_path, capsys):
    run = tiny_model().train(tiny_train_params(n_epochs=1), verbose=False)
    capsys.readouterr()
    assert main(["runs", "show", run.id, "--plot", "out.html"]) == 1
    err = capsys.readouterr().err
    assert "pip install nnx-viz" in err
    assert not (tmp_path / "out.html").exists()
    assert main(["runs", "show", run.id]) == 0  # without --plot nothing needs nnx-viz


def test_runs_report_without_nnx_viz_is_the_install_hint(tmp_path, capsys):
    run = tiny_model().train(tiny_train_params(n_epochs=1), verbose=False)
    capsys.readouterr()
    for args in ([], [run.id]):  # every run, or the named ones: nothing is read first
        assert main(["runs", "report", *args, "-o", "report.html"]) == 1
        err = capsys.readouterr().err
        assert "pip install nnx-viz" in err and "nnx runs report" in err
        assert not (tmp_path / "report.html").exists()
