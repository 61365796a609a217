"""Reading a journal directory: only what its published manifest covers.

Nothing here writes. Bytes past the manifest's ``index_bytes`` /
``epochs_bytes`` (a torn or unpublished append) and chunks past its ``chunks``
count are never read. Every chunk read is checked against its index line's
length and SHA-256, and the index is checked against the hash chain the
manifest names, before any record is returned.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import read_bounded
from nnx._foundation.hashing import sha256_hex
from nnx._foundation.records import NNIterationDataPoint
from nnx._journal.errors import HistoryCorruptionError
from nnx._journal.format import (
    EPOCHS,
    GENESIS,
    INDEX,
    MANIFEST,
    ChunkEntry,
    JournalManifest,
    chunk_name,
    decode_line,
    line_hash,
)

__all__ = ["epoch_rows", "iter_journal", "load_manifest", "read_chunk", "read_index", "tail"]


def load_manifest(hdir: Path) -> JournalManifest | None:
    """The published manifest, or None when the journal has published nothing."""
    path = hdir / MANIFEST
    try:
        data = read_bounded(path)  # a few hundred bytes; a huge one is planted, not ours
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise HistoryCorruptionError(f"{path}: {exc}") from None
    return JournalManifest.parse(data, str(path))


def _prefix(path: Path, length: int) -> bytes:
    """The first ``length`` bytes of ``path``: the published part of an appended file."""
    if length == 0:
        return b""
    try:
        with open(path, "rb") as handle:
            data = handle.read(length)
    except FileNotFoundError:
        raise HistoryCorruptionError(f"{path} is missing; the manifest covers {length} "
                                     "bytes of it") from None
    if len(data) != length or not data.endswith(b"\n"):
        raise HistoryCorruptionError(f"{path} holds {len(data)} bytes where the manifest "
                                     f"covers {length} whole lines")
    return data


def _lines(data: bytes) -> list[bytes]:
    return [line + b"\n" for line in data.split(b"\n")[:-1]]


def read_index(hdir: Path, manifest: JournalManifest) -> list[ChunkEntry]:
    """The published index lines, with the hash chain checked up to the manifest's head."""
    path = hdir / INDEX
    entries: list[ChunkEntry] = []
    head, records = GENESIS, 0
    for i, line in enumerate(_lines(_prefix(path, manifest.index_bytes))):
        where = f"{path} line {i + 1}"
        entry = ChunkEntry.parse(line, where)
        if entry.prev != head or entry.seq != i or entry.chunk != chunk_name(i):
            raise HistoryCorruptionError(f"{where} breaks the index hash chain")
        head, records = line_hash(line), records + entry.records
        entries.append(entry)
    if (len(entries), records, head) != (manifest.chunks, manifest.records, manifest.index_head):
        raise HistoryCorruptionError(f"{path} does not match the manifest's chain head "
                                     f"({len(entries)} of {manifest.chunks} chunks)")
    return entries


def read_chunk(hdir: Path, entry: ChunkEntry) -> list[NNIterationDataPoint]:
    """One chunk's records, after its length and SHA-256 match its index line."""
    path = hdir / entry.chunk
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise HistoryCorruptionError(f"committed chunk {path} is missing") from None
    if len(data) != entry.size or sha256_hex(data) != entry.sha256:
        raise HistoryCorruptionError(f"committed chunk {path} does not match its SHA-256")
    records = []
    for i, line in enumerate(_lines(data)):
        state = decode_line(line, f"{path} line {i + 1}")
        try:
            records.append(NNIterationDataPoint.from_state(state))
        except (TypeError, ValueError) as exc:
            raise HistoryCorruptionError(f"{path} line {i + 1}: {exc}") from None
    if len(records) != entry.records:
        raise HistoryCorruptionError(f"{path} holds {len(records)} records, its index line "
                                     f"{entry.records}")
    return records


def _within(records: list[NNIterationDataPoint], last_epoch: int | None
            ) -> list[NNIterationDataPoint]:
    return records if last_epoch is None else [r for r in records if r.epoch <= last_epoch]


def _records(hdir: Path, entries: list[ChunkEntry], last_epoch: int | None
             ) -> Iterator[NNIterationDataPoint]:
    for entry in entries:
        if last_epoch is not None and entry.first_epoch > last_epoch:
            return  # epochs only grow: every later chunk is past the limit too
        yield from _within(read_chunk(hdir, entry), last_epoch)


def iter_journal(hdir: Path, manifest: JournalManifest, last_epoch: int | None
                 ) -> Iterator[NNIterationDataPoint]:
    """Every published record, chunk by chunk. The index is checked before this returns."""
    return _records(hdir, read_index(hdir, manifest), last_epoch)


def tail(hdir: Path, manifest: JournalManifest, retention: int, last_epoch: int | None
         ) -> list[NNIterationDataPoint]:
    """The last ``retention`` published records, reading only the chunks holding them."""
    picked: list[list[NNIterationDataPoint]] = []
    need = retention
    for entry in reversed(read_index(hdir, manifest)):
        if need <= 0:
            break
        if last_epoch is not None and entry.first_epoch > last_epoch:
            continue
        records = _within(read_chunk(hdir, entry), last_epoch)
        picked.append(records)
        need -= len(records)
    out = [record for records in reversed(picked) for record in records]
    return out[len(out) - retention:] if len(out) > retention else out


def epoch_rows(hdir: Path, manifest: JournalManifest, last_epoch: int | None
               ) -> list[dict[str, Any]]:
    """The published epochs.jsonl rows (epochs past ``last_epoch`` left out)."""
    path = hdir / EPOCHS
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(_lines(_prefix(path, manifest.epochs_bytes))):
        row = decode_line(line, f"{path} line {i + 1}")
        if not isinstance(row, dict) or not isinstance(row.get("epoch"), int):
            raise HistoryCorruptionError(f"{path} line {i + 1}: not an epoch row")
        rows.append(row)
    if len(rows) != manifest.epochs:
        raise HistoryCorruptionError(f"{path} holds {len(rows)} rows, the manifest "
                                     f"{manifest.epochs}")
    return rows if last_epoch is None else [r for r in rows if r["epoch"] <= last_epoch]
