"""A durable ``torch.save``, as a careful hand-written loop writes it: temp file, ``fsync``,
rename, directory ``fsync``. Needs only torch, so a plain-loop process that uses it
imports nothing of NNx (short_fit_job.py's whole-process figure depends on that)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch

__all__ = ["careful_save", "durable_write", "fsync_dir"]


def durable_write(path: Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Temp file filled by ``write``, ``fsync``, rename: one file published durably (no
    directory flush)."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as handle:
        write(handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def careful_save(state: Any, path: Path) -> None:
    """``torch.save`` + ``fsync`` + rename + directory ``fsync``: a durable save."""
    durable_write(path, lambda handle: torch.save(state, handle))
    fsync_dir(path.parent)
