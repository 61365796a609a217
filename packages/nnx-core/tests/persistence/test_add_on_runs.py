"""``nnx runs list`` / ``show`` on a runs folder holding a run of an add-on that is not
installed: every run is listed, and the add-on's run shows its net by name with the
distribution that reads it (issue 26 item 3; nnx._persistence.add_on_run).

The absent add-on is simulated faithfully: a net is registered under ``GRAPH_SAGE`` (a
name nnx-core's catalog gives to nnx-graph), a run is
trained with it, and the registration is removed again, so run.yaml names a net whose
distribution is missing, exactly as an nnx-lm run does in a core-only install.
tests/persistence/test_add_on_run_fixture.py reads a real nnx-lm run the same way.
nnx-graph's are the only catalogued add-on nets and the workspace installs it (whose entry
point the CLI's registry refresh finds again), so this runs where it is absent: the
nnx-core-alone à-la-carte check.
"""

from __future__ import annotations

import importlib.util

import pytest
from _nnx_core_tiny import tiny_batches, tiny_model

from nnx import Nets, NNParams, NNTrainParams
from nnx._foundation.plugins import registry
from nnx.cli import main
from nnx.extend import MissingDistributionError, NetRegistration
from nnx.nets.feedforward import FeedFwdNN
from nnx.testing import sgd

ABSENT = "GRAPH_SAGE"
pytestmark = pytest.mark.skipif(importlib.util.find_spec("nnx.graph") is not None,
                                reason="nnx-graph is installed: its nets resolve")
NEEDS = "GRAPH_SAGE (needs nnx-graph)"


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    return tmp_path


def _train(net: Nets, **kwargs):
    params = NNTrainParams(n_epochs=2, train_loader=tiny_batches(),
                           val_loader=tiny_batches(seed=1), scheduler=None, optim=sgd())
    return tiny_model(net=net).train(params, verbose=False, **kwargs)


def _listing(capsys, code: int = 0) -> dict[str, list[str]]:
    capsys.readouterr()
    assert main(["runs", "list"]) == code
    captured = capsys.readouterr()
    # An absent add-on's run is read from its checkpoints, but its row says why; a note
    # calling its summary out of date would be wrong (issue 36 item 23).
    assert "listed from their checkpoints" not in captured.err, captured.err
    out = captured.out.splitlines()
    return {line.split()[0]: line.split() for line in out[1:]}


def _show(capsys, run_id: str) -> list[str]:
    capsys.readouterr()
    assert main(["runs", "show", run_id]) == 0
    return capsys.readouterr().out.splitlines()


@pytest.fixture
def runs(capsys):
    """(the add-on run's id, the core run's id, the listing and the add-on run's show
    while its net was registered); the net is unregistered on return."""
    nets = registry("nnx.nets")
    nets.register(ABSENT, NetRegistration(build=FeedFwdNN, params_class=NNParams))
    try:
        add_on = _train(getattr(Nets, ABSENT)).id
        core = _train(Nets.FEED_FWD, salt="core").id
        listed, shown = _listing(capsys), _show(capsys, add_on)
    finally:
        nets.unregister(ABSENT)
        Nets._members.pop(ABSENT, None)  # the member cache: a fresh process has none
    with pytest.raises(MissingDistributionError, match="pip install nnx-graph"):
        Nets[ABSENT]  # now as absent as in an install without nnx-graph
    return add_on, core, listed, shown


def test_list_shows_every_run_and_names_the_add_on_net_with_its_distribution(runs, capsys):
    add_on, core, registered, _ = runs
    rows = _listing(capsys)
    assert set(rows) == {add_on, core}
    assert rows[core] == registered[core]
    # Every column the registered listing had, the net now naming what reads it.
    assert " ".join(rows[add_on]) == " ".join(registered[add_on]).replace(
        f" {ABSENT} ", f" {NEEDS} ")


def test_show_prints_the_add_on_run_with_its_history_and_best(runs, capsys):
    add_on, core, _, registered = runs
    shown = _show(capsys, add_on[:6])  # a prefix resolves as for any run
    assert shown[0].split() == ["run:", add_on]
    assert shown[1] == f"       net: {ABSENT} (needs nnx-graph: pip install nnx-graph)"
    # The loss, optimizer, epochs, best lines and the epoch table read as they did registered.
    # (The net params need the add-on: no shape line.)
    tail = [line for line in registered if line.split()[:1] not in (["net:"], ["shape:"])]
    assert shown[2:] == tail[1:]
    assert len([line for line in shown if line.strip()[:1].isdigit()]) == 2  # two epochs
    assert any(line.startswith("      best: epoch ") for line in shown)
    assert _show(capsys, core)[1] == "       net: FEED_FWD"


def test_a_tampered_add_on_run_is_damage_and_the_others_are_still_listed(runs, capsys,
                                                                           in_tmp):
    add_on, core, _, _ = runs
    config = in_tmp / "runs" / add_on / "run.yaml"
    config.write_text(config.read_text().replace("n_epochs: 2", "n_epochs: 3"))
    rows = _listing(capsys, code=1)
    assert rows[core] and rows[add_on][1] == "damaged"
    assert "it hashes to " in " ".join(rows[add_on])
    capsys.readouterr()
    assert main(["runs", "show", add_on]) == 1
    assert "is damaged" in capsys.readouterr().err
