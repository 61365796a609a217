"""What a resume does to its source run before reading it (spec §4.2, §14.3; docs/durability.md).

Two things, both before the new run is reserved:

* a source whose history ends before the record its LAST commits (cut, or an
  older copy: :mod:`nnx._persistence.history_completeness`), or is otherwise
  unloadable, is refused with :class:`RunDamagedError` naming the file. The
  child's lineage would start from that history, and the loss would go unseen;
* the leftovers a kill stranded in the source (:mod:`nnx._persistence.leftovers`)
  are removed, under the source's lease. Only files no committed point or
  published history names are removed, so the source's data is unchanged.

A source reached through the runs/best pointer is the run it names now.
"""

from __future__ import annotations

from pathlib import Path

from nnx._persistence.best import BEST_NAME, current_best
from nnx._persistence.history_completeness import read_mark
from nnx._persistence.history_ends import check_history_ends
from nnx._persistence.leftovers import remove_leftovers
from nnx._persistence.run_damage import reading

__all__ = ["prepare_resume_source"]


def prepare_resume_source(root: Path, run_id: str) -> list[str] | None:
    """Refuse a damaged source history, then remove the source's leftovers; returns
    what was removed (None when the source's lease is held: nothing is touched)."""
    source = current_best(root) if run_id == BEST_NAME else run_id
    if source is None:
        return None
    run_dir = root / source
    last = run_dir / "checkpoints" / "last.pt"
    mark = None
    if last.is_file():
        with reading(source, last):
            mark = read_mark(last)
    check_history_ends(source, run_dir, mark)
    return remove_leftovers(root, source)
