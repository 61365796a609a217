"""The journal's on-disk format: file names, JSON lines, manifest and index entries.

Every file is UTF-8 JSON lines written compactly with ``allow_nan=True``, so
NaN and ±inf survive as the ``NaN`` / ``Infinity`` tokens Python's json reads
back. An index line's hash is the SHA-256 of its bytes without the newline;
each line names the previous line's hash (``GENESIS`` for the first), and the
manifest names the last one (the chain head).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any

from nnx._foundation.bounded import load_json
from nnx._foundation.hashing import sha256_hex
from nnx._journal.errors import HistoryCorruptionError

__all__ = [
    "EPOCHS",
    "FORMAT",
    "GENESIS",
    "HISTORY_DIR",
    "INDEX",
    "MANIFEST",
    "ChunkEntry",
    "JournalManifest",
    "chunk_name",
    "decode_line",
    "encode_line",
    "line_hash",
]

FORMAT = "nnx.history/1"
HISTORY_DIR = "history"
INDEX = "index.jsonl"
EPOCHS = "epochs.jsonl"
MANIFEST = "journal.json"
GENESIS = "0" * 64


def chunk_name(seq: int) -> str:
    return f"chunk-{seq:08d}.jsonl"


def encode_line(value: Any) -> bytes:
    """One compact JSON line (NaN and ±inf kept), newline-terminated."""
    text = json.dumps(value, allow_nan=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8") + b"\n"


def decode_line(line: bytes, where: str) -> Any:
    try:
        return json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HistoryCorruptionError(f"{where}: not a JSON line ({exc})") from None
    except RecursionError:  # a planted line nested past the parser's stack
        raise HistoryCorruptionError(f"{where}: nests too deeply to parse") from None


def line_hash(line: bytes) -> str:
    return sha256_hex(line.rstrip(b"\n"))


def _ints(doc: Any, names: tuple[str, ...], where: str) -> None:
    if not isinstance(doc, dict):
        raise HistoryCorruptionError(f"{where}: expected a JSON object")
    for name in names:
        value = doc.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise HistoryCorruptionError(f"{where}: {name} must be a count; got {value!r}")


@dataclass(frozen=True, slots=True)
class ChunkEntry:
    """One index line: a chunk file, what it holds and its digest."""

    seq: int
    chunk: str
    records: int
    first_epoch: int
    last_epoch: int
    first_iter: int
    last_iter: int
    size: int
    sha256: str
    prev: str

    def line(self) -> bytes:
        return encode_line(asdict(self))

    @classmethod
    def parse(cls, line: bytes, where: str) -> ChunkEntry:
        doc = decode_line(line, where)
        _ints(doc, ("seq", "records", "size"), where)
        try:
            entry = cls(**doc)
        except TypeError as exc:
            raise HistoryCorruptionError(f"{where}: {exc}") from None
        if not (isinstance(entry.sha256, str) and isinstance(entry.prev, str)
                and isinstance(entry.chunk, str)):
            raise HistoryCorruptionError(f"{where}: malformed index line")
        return entry


@dataclass(frozen=True, slots=True)
class JournalManifest:
    """journal.json: what the journal has published (readers trust nothing beyond it)."""

    retention: int
    chunk_size: int
    chunks: int = 0
    records: int = 0
    epochs: int = 0
    last_epoch: int | None = None
    index_bytes: int = 0
    epochs_bytes: int = 0
    index_head: str = GENESIS

    def state(self) -> dict[str, Any]:
        return {"format": FORMAT, **asdict(self)}

    def render(self) -> str:
        return json.dumps(self.state(), indent=1) + "\n"

    def advanced(self, **changes: Any) -> JournalManifest:
        return replace(self, **changes)

    @classmethod
    def parse(cls, data: bytes, where: str) -> JournalManifest:
        # The bounded reader: a planted huge or deeply nested manifest is corruption
        # (HistoryCorruptionError), never a RecursionError.
        try:
            doc = load_json(data=data, where=where)
        except ValueError as exc:
            raise HistoryCorruptionError(str(exc)) from None
        if not isinstance(doc, dict) or doc.pop("format", None) != FORMAT:
            raise HistoryCorruptionError(f"{where}: not a {FORMAT} manifest")
        _ints(doc, ("retention", "chunk_size", "chunks", "records", "epochs", "index_bytes",
                    "epochs_bytes"), where)
        try:
            return cls(**doc)
        except TypeError as exc:
            raise HistoryCorruptionError(f"{where}: {exc}") from None
