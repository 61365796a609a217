"""Finding a run's directory (a run id, ``"best"`` or a path)."""

from __future__ import annotations

import os
from pathlib import Path

from nnx._foundation.safe_paths import check_inside
from nnx._foundation.validation import check_run_id
from nnx._persistence.best_pointer import resolve_best
from nnx._persistence.run_files import check_run_files

__all__ = ["RunRef", "resolve_run"]

RunRef = str | os.PathLike[str]


def resolve_run(run: RunRef, root: str | os.PathLike[str]) -> Path:
    """``root/<id>`` for a run id (``"best"``: the run runs/best names, by name), else
    ``run`` itself as a run directory (one holding a run.yaml). Either way no symbolic
    link among the files a reader opens is followed (UnsafePathError naming it). A
    string that is neither (``"../x"``, a directory that holds no run) is refused as a
    run id (ValueError), never read as a run without records."""
    if isinstance(run, str) and _plain(run) and (Path(root) / run).is_dir():
        named = resolve_best(run, root)
        found = check_inside(root, Path(root) / named)
        return check_run_files(Path(os.path.realpath(Path(root))) / found.name)
    path = Path(run)
    if path.is_dir() and (path / "run.yaml").is_file():
        return check_run_files(Path(os.path.realpath(path)))
    if isinstance(run, str):
        check_run_id("run id", run)  # ValueError: not an id, and no run directory either
    raise FileNotFoundError(f"no run {os.fspath(run)!r} (neither {Path(root) / run} nor a "
                            "run directory)")


def _plain(run: str) -> bool:
    try:
        check_run_id("run id", run)
    except ValueError:
        return False
    return True
