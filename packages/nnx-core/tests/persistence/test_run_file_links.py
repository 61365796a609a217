"""Symbolic links among a run's own files are refused by every reader (issue 36 item 2;
SECURITY.md, "Nothing escapes the runs root"; docs/durability.md, "The path rule").

Each case moves one file a reader opens (run.yaml, metadata.yaml, idps.csv, the listing
summary, LAST, a journal file) out of the runs root and leaves a link in its place.
The target holds the very bytes the run had, so a reader that followed the link would
succeed: ``NNRun.load`` and ``iter_history`` raise ``UnsafePathError`` naming the link,
``nnx runs list`` / ``show`` / ``verify`` exit 1 naming it, and nothing on disk, inside
the root or outside it, is created, changed or deleted.
"""

from __future__ import annotations

import contextlib
import io
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from _support.disk import tree

from nnx import NNRun, NNTrainParams
from nnx._foundation.safe_paths import UnsafePathError
from nnx.cli import main
from nnx.history import HistoryJournal, iter_history

CSV_FILES = ["run.yaml", "metadata.yaml", "idps.csv", "summary.json", "checkpoints/last.pt"]
JOURNAL_FILES = ["history/journal.json", "history/index.jsonl", "history"]


def _train(root: Path, journal: bool) -> str:
    params = NNTrainParams(n_epochs=2, train_loader=tiny_batches(), scheduler=None,
                           optim=sgd())
    history = HistoryJournal(retention=4, chunk_size=2) if journal else None
    return tiny_model(hidden=5).train(params, root=root, verbose=False, history=history).id


@pytest.fixture(scope="module")
def templates(tmp_path_factory):
    base = tmp_path_factory.mktemp("links")
    return {kind: (base / kind, _train(base / kind, kind == "journal"))
            for kind in ("csv", "journal")}


def _planted(tmp_path: Path, templates, kind: str, name: str) -> SimpleNamespace:
    """A copy of the ``kind`` run whose ``name`` is a link to the same bytes outside."""
    source, run_id = templates[kind]
    root = tmp_path / "runs"
    shutil.copytree(source, root, symlinks=True)
    link = root / run_id / name
    assert link.exists(), name
    target = tmp_path / "outside" / name.replace("/", "_")
    target.parent.mkdir(exist_ok=True)
    shutil.move(link, target)
    link.symlink_to(target, target_is_directory=target.is_dir())
    return SimpleNamespace(tmp=tmp_path, root=root, id=run_id, link=link)


def _cli(*argv: str) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()) as out, \
            contextlib.redirect_stderr(out):
        code = main(list(argv))
    return code, out.getvalue()


READERS = {
    "load": lambda w: NNRun.load(w.id, root=w.root),
    "iter_history by id": lambda w: list(iter_history(w.id, root=w.root)),
    "iter_history by directory": lambda w: list(iter_history(w.root / w.id)),
}
CASES = [("csv", name) for name in CSV_FILES] + [("journal", n) for n in JOURNAL_FILES]


@pytest.mark.parametrize(("kind", "name"), CASES)
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_reader_refuses_a_symlinked_run_file_naming_it(tmp_path, templates, kind, name,
                                                         reader):
    w = _planted(tmp_path, templates, kind, name)
    if name == "summary.json" and reader != "load":
        pytest.skip("only the listing reads the summary; load checks every run file")
    before = tree(tmp_path)
    with pytest.raises(UnsafePathError, match="is a symbolic link") as caught:
        READERS[reader](w)
    assert caught.value.link == w.link
    assert tree(tmp_path) == before


@pytest.mark.parametrize(("kind", "name"), CASES)
@pytest.mark.parametrize("command", ["list", "show", "verify"])
def test_runs_list_show_and_verify_name_a_symlinked_run_file(tmp_path, templates, kind, name,
                                                             command):
    w = _planted(tmp_path, templates, kind, name)
    before = tree(tmp_path)
    argv = ["runs", command, *([] if command == "list" else [w.id]), "--root", str(w.root)]
    code, out = _cli(*argv)
    assert code == 1, out
    assert f"{w.link.as_posix()} is a symbolic link" in out, out
    if command == "list":
        row = next(line for line in out.splitlines() if line.startswith(w.id))
        assert "damaged" in row
    if command == "verify":
        assert "FAIL run  UnsafePathError" in out
    assert tree(tmp_path) == before


def test_the_run_directory_itself_as_a_link_is_refused_by_load(tmp_path, templates):
    source, run_id = templates["csv"]
    root = tmp_path / "runs"
    root.mkdir()
    shutil.copytree(source / run_id, tmp_path / "outside")
    (root / run_id).symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        NNRun.load(run_id, root=root)
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        list(iter_history(run_id, root=root))
