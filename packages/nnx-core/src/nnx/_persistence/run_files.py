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


def check_run_files(run_dir: str | os.PathLike[str], *extra: str) -> Path:
    """``run_dir`` after checking that neither it nor any of :data:`RUN_FILES` (and
    ``extra`` names) nor any entry of its history directory is a symbolic link;
    ``UnsafePathError`` names the first link found. The runs root is ``run_dir``'s
    parent: it may itself be a link, as the path rule allows."""
    path = Path(run_dir)
    root = path.parent
    for name in (*RUN_FILES, *extra):
        check_inside(root, path / name)
    try:
        # The journal reader opens its chunks, index and manifest by name, one by one.
        with os.scandir(path / HISTORY_DIR) as found:
            for entry in found:
                if entry.is_symlink():
                    check_inside(root, Path(entry.path))  # raises, naming the link
    except (FileNotFoundError, NotADirectoryError):
        pass
    return path
