"""The files a reader of a run opens, under the path rule (docs/durability.md, "The path
rule"; SECURITY.md).

``NNRun.load``, ``iter_history`` (and its lineage), ``nnx runs list`` (its torch-free
summary path and the full one), ``show`` and ``verify`` read a run's documents by name:
run.yaml, metadata.yaml, the history (idps.csv or the journal's files), the listing
summary, the provenance files, and LAST / BEST. :func:`check_run_files` applies
:func:`~nnx._foundation.safe_paths.check_inside` to each of them before any is opened,
so a planted ``run.yaml -> /elsewhere`` is refused with ``UnsafePathError`` naming the
link, never read: the check is the readers' first step, made once per run rather than
at each ``open`` of the many readers below it.
"""

from __future__ import annotations

import os
from pathlib import Path

from nnx._foundation.safe_paths import check_inside
from nnx._journal.format import HISTORY_DIR
from nnx._persistence.run_summary import SUMMARY_NAME
from nnx.provenance._files import ATTEMPT_FILE, PROVENANCE_FILE

__all__ = ["RUN_FILES", "check_run_files"]

#: Every name below a run directory that some reader of the run opens (or, for the two
#: directories, opens files in), relative to the run directory.
RUN_FILES = ("run.yaml", "metadata.yaml", "idps.csv", ".history-committed-by-last",
             SUMMARY_NAME, PROVENANCE_FILE, ATTEMPT_FILE, HISTORY_DIR, "checkpoints",
             "checkpoints/last.pt", "checkpoints/last.pt.manifest.json",
             "checkpoints/best.pt", "checkpoints/best.pt.manifest.json")


_TOP = frozenset(name for name in RUN_FILES if "/" not in name)
_IN_CHECKPOINTS = frozenset(name.split("/", 1)[1] for name in RUN_FILES if "/" in name)


def check_run_files(run_dir: str | os.PathLike[str], *extra: str) -> Path:
    """``run_dir`` after checking that neither it nor any of :data:`RUN_FILES` (and
    ``extra`` names, ``"checkpoints/<file>"`` or top-level) nor any entry of its history
    directory is a symbolic link; ``UnsafePathError`` names the first link found. The
    runs root is ``run_dir``'s parent: it may itself be a link, as the path rule allows.

    One directory scan each (the run, its checkpoints, its history) reads every entry's
    type at once: ``nnx runs list`` makes this check for each of a thousand runs."""
    path = Path(run_dir)
    root = path.parent
    check_inside(root, path)
    top = _TOP.union(name for name in extra if "/" not in name)
    below = _IN_CHECKPOINTS.union(name.split("/", 1)[1] for name in extra
                                  if name.startswith("checkpoints/"))
    # Top level first: a linked checkpoints/ or history/ is refused before it is scanned.
    _refuse_links(root, path, top)
    _refuse_links(root, path / "checkpoints", below)
    _refuse_links(root, path / HISTORY_DIR, None)  # the journal opens each file by name
    return path


def _refuse_links(root: Path, directory: Path, names: frozenset[str] | None) -> None:
    """UnsafePathError for the first symbolic link among ``directory``'s entries named in
    ``names`` (every entry: None); a missing directory has none."""
    try:
        with os.scandir(directory) as found:
            for entry in found:
                if entry.is_symlink() and (names is None or entry.name in names):
                    check_inside(root, Path(entry.path))  # raises, naming the link
    except (FileNotFoundError, NotADirectoryError):
        pass
