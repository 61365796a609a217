"""Bounded readers for the small JSON / YAML documents under a runs root.

A manifest, the score beside runs/best, run.yaml, metadata.yaml or a journal's
manifest is a few kilobytes and a few levels deep. A damaged or planted one may
be huge or nested thousands of levels (which makes the parsers, and any code
walking the result, raise ``RecursionError``). These readers refuse both with a
``ValueError`` naming the file, before anything is built on the content, so
every caller maps the failure to the named error of its own path (a damaged
run, a torn resume point, an ignored cache).
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

__all__ = ["MAX_DEPTH", "MAX_DOCUMENT_BYTES", "check_nesting", "check_shape", "load_json",
           "load_yaml", "read_bounded"]

#: Deeper than any document NNx writes (run.yaml nests about 6 levels).
MAX_DEPTH = 64
#: Larger than any such document NNx writes (a run.yaml of a large net is ~10 kB).
MAX_DOCUMENT_BYTES = 16 * 1024 * 1024
#: Nodes of one document after YAML aliases are expanded (a "billion laughs" guard).
_MAX_NODES = 1_000_000

#: One token of the nesting scan: an opening or closing bracket, a whole string, or a
#: quote that opens no terminated string. The string pattern is unrolled and possessive
#: (``*+``): a run of plain characters is one step and no repetition keeps a backtracking
#: frame, so the regex engine holds constant memory whatever the string's length or its
#: count of escapes (the naive ``(?:[^"\\]|\\.)*`` kept ~120 bytes per byte, issue 36).
#: Python 3.10's re has no possessive quantifiers: there the unrolled pattern alone
#: still keeps a frame per escape, so only a string of many escapes costs more.
_POSSESSIVE = "+" if sys.version_info >= (3, 11) else ""  # 3.10's re has no possessive
_TOKEN = (r'(?P<open>[\[{])|(?P<close>[\]}])|"[^"\\]*{p}(?:\\.[^"\\]*{p})*{p}"|(?P<bad>")'
          .replace("{p}", _POSSESSIVE))
_TOKENS = re.compile(_TOKEN, re.DOTALL)
_TOKENS_BYTES = re.compile(_TOKEN.encode("ascii"), re.DOTALL)

# The C parser when PyYAML has it: both build the same plain values.
_YamlLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_bounded(path: str | os.PathLike[str], *, max_bytes: int = MAX_DOCUMENT_BYTES) -> bytes:
    """The bytes of ``path``; ValueError when it holds more than ``max_bytes``."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise ValueError(f"{Path(path).name} is larger than {max_bytes} bytes")
    return data


def check_shape(value: Any, where: str, *, max_depth: int = MAX_DEPTH) -> Any:
    """``value`` after checking, without recursion, that it nests at most ``max_depth``
    containers deep and holds at most a million nodes."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    nodes = 0
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > _MAX_NODES:
            raise ValueError(f"{where} holds more than {_MAX_NODES} values")
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth >= max_depth:
            raise ValueError(f"{where} nests deeper than {max_depth} levels")
        stack.extend((child, depth + 1) for child in children)
    return value


def load_json(path: str | os.PathLike[str] | None = None, *,
              data: bytes | bytearray | memoryview | str | None = None,
              where: str | None = None, max_bytes: int = MAX_DOCUMENT_BYTES,
              max_depth: int = MAX_DEPTH,
              parse_constant: Callable[[str], Any] | None = None,
              strict: bool = False) -> Any:
    """One JSON document from ``path`` (or ``data``), bounded in size and depth; every
    failure (unreadable, too large, not JSON, too deep) is a ValueError or OSError.
    ``parse_constant`` is :func:`json.loads`' hook for NaN / Infinity (a strict reader
    raises ValueError from it).

    ``strict=True`` (documents read from a stranger: a run bundle, spec §22) also
    refuses a duplicate key in any object, NaN / Infinity and a number beyond a float's
    range, and measures the nesting
    on the raw text before the parser runs, so a 10,000-deep document never reaches
    the parser's recursion.

    Memory stays linear in the document with a small constant: the bytes are decoded
    once (``data`` may be a memoryview of a larger buffer, decoded without an
    intermediate copy), the nesting scan copies nothing, and the parser builds the
    values; a document of one long ASCII string peaks near three times its size."""
    name = where or (Path(path).name if path is not None else "document")
    raw = _text(_raw(path, data, name, max_bytes), name)
    pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None
    parse_float: Callable[[str], Any] | None = None
    if strict:
        check_nesting(raw, name, max_depth=max_depth)
        pairs_hook = _unique_keys(name)
        parse_constant = _no_constant(name)
        parse_float = _finite_float(name)
    try:
        value = json.loads(raw, parse_constant=parse_constant, object_pairs_hook=pairs_hook,
                           parse_float=parse_float)
    except RecursionError:
        raise ValueError(f"{name} nests too deeply to parse") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{name} is not JSON ({exc})") from None
    return check_shape(value, name, max_depth=max_depth)


def check_nesting(raw: bytes | str, where: str, *, max_depth: int = MAX_DEPTH) -> None:
    """ValueError when the JSON text ``raw`` opens more than ``max_depth`` brackets at
    once; one pass over the text, no parser involved. Brackets inside strings are
    skipped (escapes honoured), so a string of ``[`` never counts.

    The scan copies nothing: it walks the tokens in place and holds only a counter,
    so its memory does not grow with the text. At an unterminated string it stops:
    the text is not JSON, and the parser that runs next says so."""
    matches = (_TOKENS.finditer(raw) if isinstance(raw, str)
               else _TOKENS_BYTES.finditer(raw))
    depth = 0
    for match in matches:
        kind = match.lastgroup
        if kind == "open":
            depth += 1
            if depth > max_depth:
                raise ValueError(f"{where} nests deeper than {max_depth} levels")
        elif kind == "close":
            depth -= 1
        elif kind == "bad":
            return


def _unique_keys(where: str) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in items:
            if key in out:
                raise ValueError(f"{where} repeats the key {key!r} in one object")
            out[key] = value
        return out
    return pairs


def _finite_float(where: str) -> Callable[[str], float]:
    """A number literal beyond a float's range (``1e999``) parses to inf: refused, since
    strict JSON has no infinity (a non-finite value is spelled out, e.g. ``$float``)."""
    def parse(text: str) -> float:
        value = float(text)
        if not math.isfinite(value):
            raise ValueError(f"{where} holds the number {text}, too large for a float")
        return value
    return parse


def _no_constant(where: str) -> Callable[[str], Any]:
    def refuse(token: str) -> Any:
        raise ValueError(f"{where} holds {token}, which strict JSON does not allow")
    return refuse


def load_yaml(path: str | os.PathLike[str] | None = None, *, data: bytes | str | None = None,
              where: str | None = None, max_bytes: int = MAX_DOCUMENT_BYTES,
              max_depth: int = MAX_DEPTH) -> Any:
    """One YAML document through the safe loader, bounded like :func:`load_json`."""
    name = where or (Path(path).name if path is not None else "document")
    raw = _raw(path, data, name, max_bytes)
    try:
        value = yaml.load(raw, Loader=_YamlLoader)  # a safe loader (CSafeLoader or SafeLoader)
    except RecursionError:
        raise ValueError(f"{name} nests too deeply to parse") from None
    except yaml.YAMLError as exc:
        # The parser's error class stays in the message: it is the plainest diagnosis.
        raise ValueError(f"{name} is not YAML ({type(exc).__name__}: {_first_line(exc)})"
                         ) from None
    return check_shape(value, name, max_depth=max_depth)


def _text(raw: bytes | bytearray | memoryview | str, name: str) -> str:
    """JSON text as :func:`json.loads` would decode it (its encoding detection, surrogates
    passed), read straight from the buffer: no bytes copy is made first."""
    if isinstance(raw, str):
        return raw
    view = memoryview(raw)
    try:
        return str(view, json.detect_encoding(bytes(view[:4])), "surrogatepass")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{name} is not JSON ({exc})") from None


def _raw(path: str | os.PathLike[str] | None, data: bytes | bytearray | memoryview | str | None,
         name: str, max_bytes: int) -> bytes | bytearray | memoryview | str:
    """The document's text: ``data``, else ``path``'s bytes; either way at most ``max_bytes``."""
    if data is None:
        if path is None:
            raise ValueError(f"{name}: neither a path nor data to read")
        return read_bounded(path, max_bytes=max_bytes)
    if len(data) > max_bytes:
        raise ValueError(f"{name} is larger than {max_bytes} bytes")
    return data


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
