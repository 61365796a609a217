"""Whether a run's history holds every record LAST committed (spec §4.2; docs/durability.md).

The evidence is LAST itself, so nothing new is written per epoch: every checkpoint
records its epoch's last record (``idp``), the very record the epoch transaction's
history step wrote just before LAST. The committed history (its records up to
LAST's epoch) must therefore end with a record of LAST's epoch and LAST's
``iter_idx``. A history that ends anywhere else lost records: an idps.csv cut at a
row boundary (inside LAST's epoch too, or down to its header), an older idps.csv,
an older ``history/journal.json``. That is :class:`RunDamagedError` naming the file.

A history *newer* than LAST is not damage: the history step runs before LAST, so a
kill between them leaves records past LAST's epoch, which readers filter (§4.2).
A LAST that carries no record (a hand-made or pre-record checkpoint) is checked by
its epoch alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nnx._foundation.records import NNIterationDataPoint
from nnx._persistence.run_damage import RunDamagedError

__all__ = ["LastMark", "check_ends_at", "last_within", "read_mark"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True, slots=True)
class LastMark:
    """Where LAST says the committed history ends: its epoch and, when LAST carries its
    record, that record's ``iter_idx``."""

    epoch: int
    iter_idx: int | None = None

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> LastMark:
        """The mark of a checkpoint payload (as :func:`read_record` returns it)."""
        epoch = _int(record.get("epoch"))
        if epoch is None:
            raise ValueError(f"it records no epoch (got {record.get('epoch')!r})")
        idp = record.get("idp")
        return cls(epoch, _int(idp.get("iter_idx")) if isinstance(idp, Mapping) else None)

    def __str__(self) -> str:
        it = "" if self.iter_idx is None else f" (last record iter_idx {self.iter_idx})"
        return f"epoch {self.epoch}{it}"


def read_mark(last: Path) -> LastMark:
    """LAST's mark, through the safe reader (nothing unpickled, no tensor read)."""
    from nnx._persistence.checkpoint_format import read_record  # lazy: loads torch

    return LastMark.of(read_record(last))


def last_within(records: Iterable[NNIterationDataPoint], epoch: int
                ) -> tuple[int, int] | None:
    """(epoch, iter_idx) of the last record at or before ``epoch``; None without one."""
    found = None
    for record in records:
        if record.epoch <= epoch:
            found = (record.epoch, record.iter_idx)
    return found


def check_ends_at(run_id: str, path: Path, last: tuple[int, int] | None,
                  mark: LastMark) -> None:
    """Refuse a history whose last committed record ``last`` ((epoch, iter_idx) at or
    before LAST's epoch, None without one) is not the record LAST ``mark`` committed."""
    if last is None:
        raise RunDamagedError(run_id, path, f"holds no committed record, but LAST commits "
                              f"{mark}: the history is cut or an older copy")
    epoch, iter_idx = last
    if epoch == mark.epoch and mark.iter_idx in (None, iter_idx):
        return
    raise RunDamagedError(run_id, path, f"ends at epoch {epoch} (iter_idx {iter_idx}), but "
                          f"LAST commits {mark}: records are missing (the history is cut or "
                          "an older copy)")
