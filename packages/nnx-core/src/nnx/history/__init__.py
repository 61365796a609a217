"""Bounded history: the history journal (spec §4.5).

``HistoryJournal(retention=..., chunk_size=...)`` switches a run from the
eager idps.csv to ``runs/<id>/history/``: immutable JSON-lines chunks, a
hash-chained ``index.jsonl``, one ``epochs.jsonl`` row per epoch and the
atomically replaced ``journal.json`` manifest. Readers trust only what the
manifest covers.

Writing (the training loop; :mod:`nnx._journal.writer` documents the protocol)::

    writer = JournalWriter(run_dir, journal)
    writer.append(idp); writer.replace_last(idp)        # during the epoch
    writer.commit_epoch(epoch, epoch_summary(idp))      # the "history" step, before LAST
    writer.rollback()                                   # when LAST fails
    writer.window                                       # HistoryWindow: the last records

Reading: :func:`iter_history`, :func:`read_tail`, :func:`read_epochs`,
:func:`read_manifest`, :func:`check_history` (manifest and index only),
:func:`export_history_csv`; converting a CSV run:
:func:`migrate_history`.
"""

from nnx._journal.errors import HistoryCorruptionError
from nnx._journal.format import JournalManifest
from nnx._journal.reader import check_history, read_epochs, read_manifest, read_tail
from nnx._journal.spec import HistoryJournal
from nnx._journal.window import HistoryWindow
from nnx._journal.writer import JournalWriter, epoch_summary
from nnx.history.export import export_history_csv
from nnx.history.migrate import migrate_history
from nnx.history.reader import iter_history

__all__ = [
    "HistoryCorruptionError",
    "HistoryJournal",
    "HistoryWindow",
    "JournalManifest",
    "JournalWriter",
    "check_history",
    "epoch_summary",
    "export_history_csv",
    "iter_history",
    "migrate_history",
    "read_epochs",
    "read_manifest",
    "read_tail",
]
