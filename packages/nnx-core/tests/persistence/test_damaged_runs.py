"""A damaged run never hides the healthy ones (spec §4, §4.2): NNRun.load names the file
and the cause (RunDamagedError), NNRun.scan / NNRun.all / ``nnx runs list`` go on, and
``nnx runs show`` of a damaged run is one line and exit 1."""

from __future__ import annotations

import functools

import pytest
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

import nnx
from nnx import DamagedRun, NNRun, NNTrainParams, RunDamagedError
from nnx.cli import main

make_model = functools.partial(tiny_model, hidden=6)


def train(root, salt):
    params = NNTrainParams(n_epochs=2, train_loader=tiny_batches(), scheduler=None,
                           optim=sgd())
    return make_model().train(params, salt=salt, root=root, verbose=False)


def garbage_run_yaml(run_dir):
    (run_dir / "run.yaml").write_text("model: [not, {a: run\n")
    return "run.yaml", "ParserError: while parsing a flow mapping"


def truncated_idps(run_dir):
    text = (run_dir / "idps.csv").read_text()
    (run_dir / "idps.csv").write_text(text[: len(text) * 2 // 3].rsplit(",", 1)[0])
    return "idps.csv", "Error"


def empty_last(run_dir):
    (run_dir / "checkpoints" / "last.pt").write_bytes(b"")
    return "checkpoints/last.pt", "empty file (0 bytes)"


def truncated_last(run_dir):
    last = run_dir / "checkpoints" / "last.pt"
    last.write_bytes(last.read_bytes()[:100])
    return "checkpoints/last.pt", "RuntimeError"


def deleted_idps(run_dir):
    (run_dir / "idps.csv").unlink()
    return "idps.csv", "missing, but LAST commits epoch 1"


DAMAGE = [garbage_run_yaml, truncated_idps, empty_last, truncated_last, deleted_idps]


@pytest.fixture
def runs(tmp_path):
    root = tmp_path / "runs"
    healthy, broken = train(root, "healthy"), train(root, "broken")
    return root, healthy, broken


@pytest.mark.parametrize("damage", DAMAGE)
def test_load_names_the_damaged_file_and_leaves_it_as_it_is(runs, damage):
    root, _, broken = runs
    file, cause = damage(root / broken.id)
    before = {p: p.read_bytes() for p in (root / broken.id).rglob("*") if p.is_file()}
    with pytest.raises(RunDamagedError) as caught:
        NNRun.load(broken.id, root=root)
    err = caught.value
    assert isinstance(err, ValueError) and err.run_id == broken.id
    assert err.path == root / broken.id / file and cause in err.reason
    assert f"run {broken.id} is damaged" in str(err) and file in str(err)
    after = {p: p.read_bytes() for p in (root / broken.id).rglob("*") if p.is_file()}
    assert after == before  # reading never repairs nor erases


@pytest.mark.parametrize("damage", DAMAGE)
def test_scan_and_all_list_the_healthy_runs_and_name_the_damaged_one(runs, damage):
    root, healthy, broken = runs
    file, _ = damage(root / broken.id)
    found, damaged = NNRun.scan(root)
    assert [r.id for r in found] == [healthy.id]
    assert damaged == [DamagedRun(broken.id, root / broken.id / file, damaged[0].reason)]
    with pytest.warns(RuntimeWarning, match=rf"skipped 1 damaged run.*{broken.id}.*{file}"):
        assert [r.id for r in NNRun.all(root=root)] == [healthy.id]
    assert nnx.RunDamagedError is RunDamagedError and nnx.DamagedRun is DamagedRun


@pytest.mark.parametrize("damage", DAMAGE)
def test_runs_list_shows_a_damaged_row_and_every_healthy_run(runs, damage, capsys,
                                                            monkeypatch):
    root, healthy, broken = runs
    file, _ = damage(root / broken.id)
    monkeypatch.chdir(root.parent)
    assert main(["runs", "list"]) == 1  # a damaged run is reported in the exit status
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("run id")
    rows = {line.split()[0]: line for line in out[1:]}
    assert set(rows) == {healthy.id, broken.id}
    assert f"damaged  runs/{broken.id}/{file}: " in rows[broken.id]
    assert "damaged" not in rows[healthy.id] and " 2 " in rows[healthy.id]


@pytest.mark.parametrize("damage", DAMAGE)
def test_runs_show_of_a_damaged_run_is_one_line_and_exit_1(runs, damage, capsys,
                                                           monkeypatch):
    root, healthy, broken = runs
    file, _ = damage(root / broken.id)
    monkeypatch.chdir(root.parent)
    assert main(["runs", "show", broken.id]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and f"run {broken.id} is damaged: runs/{broken.id}/{file}: " in (
        lines[0])
    assert main(["runs", "show", healthy.id]) == 0


def test_a_torn_best_checkpoint_is_damage_too(runs, capsys, monkeypatch):
    root, _, broken = runs
    (root / broken.id / "checkpoints" / "best.pt").write_bytes(b"PK\x03\x04 torn")
    with pytest.raises(RunDamagedError, match=r"checkpoints/best\.pt"):
        NNRun.load(broken.id, root=root).best_checkpoint()
    monkeypatch.chdir(root.parent)
    assert main(["runs", "show", broken.id]) == 1
    assert "checkpoints/best.pt" in capsys.readouterr().err


def test_runs_show_refuses_an_id_outside_the_root(runs, capsys, monkeypatch):
    root, healthy, _ = runs
    monkeypatch.chdir(root.parent)
    assert main(["runs", "show", f"../runs/{healthy.id}"]) == 1
    assert "is not a run id" in capsys.readouterr().err
