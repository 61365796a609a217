"""What a resume checks of its source run before reading it (spec §4.2, §14.3;
docs/durability.md, History completeness).

A source whose history ends before the record its LAST commits (cut, or an older
copy: :mod:`nnx._persistence.history_completeness`), or is otherwise unloadable, is
refused with :class:`RunDamagedError` naming the file, before the new run is
reserved: the child's lineage would start from that history and the loss would go
unseen. Only the history's ends are read, and nothing is written; the check runs
before the resume settles the source's owed points and leftovers, so a damaged
source is left exactly as found. A source reached through the runs/best pointer is
the run it names now.
"""

from __future__ import annotations

from pathlib import Path

from nnx._persistence.best import BEST_NAME, current_best
from nnx._persistence.best_pointer import resolve_best
from nnx._persistence.history_completeness import read_mark
from nnx._persistence.history_ends import check_history_ends
from nnx._persistence.run_damage import RunDamagedError, reading

__all__ = ["check_resume_source", "require_source_run"]


def require_source_run(root: Path, run_id: str) -> str:
    """The run a resume of ``run_id`` reads (``"best"``: the run runs/best names now);
    FileNotFoundError when no such run exists under ``root``. Only looks: nothing under
    ``root`` is created, so a refused resume leaves no lease file of a run that never
    was (ExperimentPlan.validate() asks the same, before any fit)."""
    source = resolve_best(run_id, root)
    if not (Path(root) / source).is_dir():
        raise FileNotFoundError(f"cannot resume: no run {source} under "
                                f"{Path(root).as_posix()}/")
    return source


def check_resume_source(root: Path, run_id: str) -> None:
    """Refuse a resume whose source ``run_id`` under ``root`` has a damaged history."""
    source = current_best(root) if run_id == BEST_NAME else run_id
    if source is None:
        return
    run_dir = root / source
    last = run_dir / "checkpoints" / "last.pt"
    mark = None
    if last.is_file():
        try:
            with reading(source, last):
                mark = read_mark(last)
        except RunDamagedError:
            return  # LAST itself is unreadable: the point's verification refuses it by name
    check_history_ends(source, run_dir, mark)
