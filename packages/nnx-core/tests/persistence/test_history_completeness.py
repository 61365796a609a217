"""A history that ends before the record LAST commits is damage, on every load path
(issue item 3; spec §4.2, §4.5; docs/durability.md, History completeness).

The evidence is LAST's own record of its epoch's last record (epoch and iter_idx):
an idps.csv cut at a row boundary (inside LAST's epoch, at an epoch boundary, down
to its header), an older idps.csv and an older history/journal.json each raise
RunDamagedError naming the file from NNRun.load, iter_history / export_history_csv,
the cheap check_history_ends (``nnx runs list``, the runs/best election) and a resume
from the run, and nothing on disk changes. A history newer than LAST (the history
step ran, LAST did not) and a history rolled back after a failed LAST still load.
"""

from __future__ import annotations

import dataclasses

import pytest
from _nnx_core_tiny import sgd, tiny_batches, tiny_model

from nnx import Callback, NNCheckpoint, NNRun, NNTrainParams, RunDamagedError
from nnx._persistence.best import candidate_score, elect_best
from nnx._persistence.history_ends import check_history_ends
from nnx.cli import main
from nnx.history import (
    HistoryCorruptionError,
    HistoryJournal,
    JournalManifest,
    JournalWriter,
    epoch_summary,
    export_history_csv,
    iter_history,
)

EPOCHS = 3  # LAST commits epoch 2; every epoch has 2 records (tiny_batches)


def params(n_epochs: int = EPOCHS, **changes) -> NNTrainParams:
    # Keep copies a history file from on_epoch_end as the previous commit left it: the
    # synchronous commit has always written it by then (a background one may not have).
    return NNTrainParams(n_epochs=n_epochs, train_loader=tiny_batches(),
                         val_loader=tiny_batches(seed=1), scheduler=None, optim=sgd(),
                         async_commit=False, **changes)


class Keep(Callback):
    """Copies a history file as it was when epoch ``epoch`` ended (before it committed):
    an older copy of the file, holding the epochs before ``epoch``."""

    def __init__(self, relative: str, epoch: int) -> None:
        self.relative, self.epoch, self.data = relative, epoch, b""

    def on_epoch_end(self, ctx):
        if ctx.epoch == self.epoch:
            self.data = (ctx.run.path / self.relative).read_bytes()


def snapshot(root):
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def train_csv(root, salt="damaged"):
    keep = Keep("idps.csv", 1)
    run = tiny_model().train(params(), callbacks=[keep], salt=salt, root=root, verbose=False)
    return run, keep.data


def train_journal(root, salt="damaged"):
    keep = Keep("history/journal.json", 2)
    run = tiny_model().train(params(), callbacks=[keep], salt=salt, root=root, verbose=False,
                             history=HistoryJournal(retention=4, chunk_size=2))
    return run, keep.data


# -- the damage --------------------------------------------------------------------------
def _lines(path):
    return path.read_text().splitlines(keepends=True)


def header_only(run_dir, _older):
    path = run_dir / "idps.csv"
    path.write_text(_lines(path)[0])
    return "idps.csv"


def cut_inside_last_epoch(run_dir, _older):
    path = run_dir / "idps.csv"
    path.write_text("".join(_lines(path)[:-1]))  # the last record of epoch 2 is gone
    return "idps.csv"


def cut_at_an_epoch_boundary(run_dir, _older):
    path = run_dir / "idps.csv"
    path.write_text("".join(_lines(path)[:-2]))  # epoch 2's two records are gone
    return "idps.csv"


def older_idps_csv(run_dir, older):
    (run_dir / "idps.csv").write_bytes(older)  # as it was after epoch 0 committed
    return "idps.csv"


CSV_DAMAGE = [header_only, cut_inside_last_epoch, cut_at_an_epoch_boundary, older_idps_csv]


@pytest.mark.parametrize("damage", CSV_DAMAGE)
def test_a_csv_history_cut_short_of_last_is_damage_on_every_load_path(in_tmp, damage, capsys):
    root = in_tmp / "runs"
    healthy, _ = train_csv(root, salt="healthy")
    run, older = train_csv(root)
    run_dir = root / run.id
    assert older and NNRun.load(run.id, root=root).epoch_records()[-1].epoch == 2
    file = damage(run_dir, older)
    before = snapshot(root)

    with pytest.raises(RunDamagedError) as caught:
        NNRun.load(run.id, root=root)
    err = caught.value
    assert err.run_id == run.id and err.path == run_dir / file
    assert "LAST commits epoch 2 (last record iter_idx 5)" in err.reason
    for read in (lambda: list(iter_history(run.id, root=root)),
                 lambda: export_history_csv(run.id, in_tmp / "out.csv", root=root),
                 lambda: check_history_ends(run.id, run_dir, 2)):
        with pytest.raises(RunDamagedError, match=f"{run.id} is damaged: .*{file}"):
            read()
    assert not (in_tmp / "out.csv").exists()

    # nnx runs list: the damaged row (not "3 epochs, committed"), exit 1, every other run.
    capsys.readouterr()
    assert main(["runs", "list"]) == 1
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert f"damaged  runs/{run.id}/{file}: " in rows[run.id]
    assert "committed" in rows[healthy.id]

    # Never a runs/best candidate; a resume from it is refused before anything is made.
    assert candidate_score(run_dir) is None and candidate_score(root / healthy.id) is not None
    with pytest.raises(RunDamagedError, match=file):
        tiny_model().train(params(1, resume_from_run_id=run.id), root=root, verbose=False)
    assert snapshot(root) == before  # reading, listing and the refusal changed nothing


def test_an_older_journal_manifest_is_damage_on_every_load_path(in_tmp, capsys):
    root = in_tmp / "runs"
    run, older = train_journal(root)
    run_dir = root / run.id
    manifest = run_dir / "history" / "journal.json"
    manifest.write_bytes(older)  # publishes epochs 0-1; LAST commits epoch 2
    before = snapshot(root)
    with pytest.raises(RunDamagedError) as caught:
        NNRun.load(run.id, root=root)
    assert caught.value.path == manifest
    assert "ends at epoch 1 (iter_idx 3), but LAST commits epoch 2" in caught.value.reason
    for read in (lambda: list(iter_history(run.id, root=root)),
                 lambda: export_history_csv(run.id, in_tmp / "out.csv", root=root),
                 lambda: check_history_ends(run.id, run_dir, 2)):
        with pytest.raises(RunDamagedError, match=r"history/journal\.json"):
            read()
    capsys.readouterr()
    assert main(["runs", "list"]) == 1
    assert f"damaged  runs/{run.id}/history/journal.json: " in capsys.readouterr().out
    assert candidate_score(run_dir) is None
    with pytest.raises(RunDamagedError, match=r"journal\.json"):
        tiny_model().train(params(1, resume_from_run_id=run.id), root=root, verbose=False)
    assert snapshot(root) == before and not (in_tmp / "out.csv").exists()


def test_a_journal_with_nothing_published_under_a_committed_last_is_damage(in_tmp):
    root = in_tmp / "runs"
    run, _ = train_journal(root)
    manifest = root / run.id / "history" / "journal.json"
    manifest.write_text(JournalManifest(retention=4, chunk_size=2).render())  # the first one
    with pytest.raises(RunDamagedError, match="holds no committed record, but LAST commits"):
        NNRun.load(run.id, root=root)
    with pytest.raises(RunDamagedError, match=r"journal\.json: holds no committed record"):
        check_history_ends(run.id, root / run.id, 2)


# -- what is not damage ------------------------------------------------------------------
def test_a_csv_history_newer_than_last_loads_up_to_last(in_tmp, capsys):
    """The history step runs before LAST: a kill between them leaves an epoch LAST does
    not commit, which every reader filters (the cheap check reads past it)."""
    root = in_tmp / "runs"
    run, _ = train_csv(root)
    path = root / run.id / "idps.csv"
    lines = _lines(path)
    uncommitted = [line.replace("2,", "3,", 1) for line in lines[-2:]]
    path.write_text("".join(lines + uncommitted))
    loaded = NNRun.load(run.id, root=root)
    assert [r.epoch for r in loaded.idps] == [0, 0, 1, 1, 2, 2]
    assert [r.epoch for r in iter_history(run.id, root=root)][-1] == 2
    check_history_ends(run.id, root / run.id, 2)
    capsys.readouterr()
    assert main(["runs", "list"]) == 0 and "committed" in capsys.readouterr().out


def test_a_journal_newer_than_last_loads_up_to_last(in_tmp):
    root = in_tmp / "runs"
    run, _ = train_journal(root)
    last = NNRun.load(run.id, root=root).idps[-1]
    writer = JournalWriter(root / run.id, HistoryJournal(retention=4, chunk_size=2))
    extra = dataclasses.replace(last, epoch=3, iter_idx=last.iter_idx + 1, batch_idx=0)
    writer.append(extra)
    writer.commit_epoch(3, epoch_summary(extra))  # published; its LAST never came
    assert [r.epoch for r in NNRun.load(run.id, root=root).idps][-1] == 2
    assert len(list(iter_history(run.id, root=root))) == 6
    check_history_ends(run.id, root / run.id, 2)


def test_a_history_rolled_back_after_a_failed_last_loads(in_tmp, monkeypatch):
    root = in_tmp / "runs"
    save = NNCheckpoint.save

    def failing(self, path, *args, **kwargs):
        if path.name == "last.pt" and self.epoch == 1:
            raise OSError("disk full")
        return save(self, path, *args, **kwargs)

    monkeypatch.setattr(NNCheckpoint, "save", failing)
    with pytest.raises(OSError, match="disk full"):
        tiny_model().train(params(), root=root, verbose=False)
    run_id = next(p.name for p in root.iterdir() if not p.name.startswith("."))
    loaded = NNRun.load(run_id, root=root)  # epoch 1 rolled back: LAST is epoch 0's
    assert [r.epoch for r in loaded.idps] == [0, 0]
    check_history_ends(run_id, root / run_id, 0)


def test_a_last_that_carries_no_record_is_checked_by_its_epoch(in_tmp):
    from _support.history_journal import write_last

    root = in_tmp / "runs"
    run, _ = train_csv(root)
    run_dir = root / run.id
    write_last(run_dir, 2)  # a hand-made LAST: {"epoch": 2} only
    cut_inside_last_epoch(run_dir, b"")
    assert [r.epoch for r in iter_history(run_dir)][-1] == 2  # epoch alone: not visible
    write_last(run_dir, 3)
    with pytest.raises(RunDamagedError, match="LAST commits epoch 3: records are missing"):
        list(iter_history(run_dir))
    assert elect_best(root) is None  # LAST no longer a checkpoint: never a candidate


# -- bounded YAML / JSON -----------------------------------------------------------------
DEEP_YAML = "a: " + "[" * 900 + "]" * 900 + "\n"  # parses; deeper than any NNx document
DEEP_JSON = "[" * 100000 + "]" * 100000


@pytest.mark.parametrize("name", ["run.yaml", "metadata.yaml", "history/journal.json"])
def test_a_deeply_nested_document_is_named_damage_not_a_recursion_error(in_tmp, name, capsys):
    root = in_tmp / "runs"
    run, _ = train_journal(root) if name.startswith("history") else train_csv(root)
    path = root / run.id / name
    path.write_text(DEEP_JSON if name.endswith(".json") else DEEP_YAML)
    before = snapshot(root)
    with pytest.raises(RunDamagedError) as caught:
        NNRun.load(run.id, root=root)
    assert caught.value.path in (path, path.parent)  # the journal is named by its directory
    assert "deeper than" in caught.value.reason or "too deeply" in caught.value.reason
    capsys.readouterr()
    assert main(["runs", "list"]) == 1
    out = capsys.readouterr()
    assert f"damaged  runs/{run.id}/" in out.out and "Traceback" not in out.err
    if name.startswith("history"):
        with pytest.raises(HistoryCorruptionError, match=r"too deeply|deeper"):
            list(iter_history(run.id, root=root))
    assert snapshot(root) == before
