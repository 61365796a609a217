"""Attempts (spec §4.4): every fit records one execution of the plan.

:func:`begin_attempt` writes ``provenance.json`` (the manifest, written once
and never rewritten) and a fresh ``attempt.json`` (status "running"). The
returned :class:`Attempt` rewrites attempt.json, atomically, when a checkpoint
is committed and when the attempt finishes.
"""

from __future__ import annotations

import dataclasses
import os
import uuid
import warnings
from collections.abc import Mapping
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from nnx._foundation.validation import check_choice, check_count
from nnx.provenance._files import ATTEMPT_FILE, PROVENANCE_FILE, write_json
from nnx.provenance.manifest import ExperimentManifest
from nnx.provenance.reading import load_manifest
from nnx.provenance.record import FINAL_STATUSES, AttemptRecord

__all__ = ["Attempt", "begin_attempt"]


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _error_type(error: BaseException) -> str:
    kind = type(error)
    return kind.__qualname__ if kind.__module__ == "builtins" else \
        f"{kind.__module__}.{kind.__qualname__}"


class Attempt:
    """The live handle of one attempt; :attr:`record` is what attempt.json holds."""

    def __init__(self, run_dir: Path, record: AttemptRecord) -> None:
        self.run_dir = run_dir
        self._record = record

    @property
    def record(self) -> AttemptRecord:
        return self._record

    @property
    def attempt_id(self) -> str:
        return self._record.attempt_id

    @property
    def fingerprint(self) -> str:
        return self._record.fingerprint

    @property
    def status(self) -> str:
        return self._record.status

    def _update(self, **changes: Any) -> AttemptRecord:
        self._record = dataclasses.replace(self._record, **changes)
        write_json(self.run_dir / ATTEMPT_FILE, self._record.state())
        return self._record

    def _require_running(self, action: str) -> None:
        if self._record.status != "running":
            raise RuntimeError(f"attempt {self.attempt_id} is {self._record.status}; "
                               f"cannot {action}")

    def committed(self, tag: str, epoch: int, generation: int) -> AttemptRecord:
        """Record the last committed checkpoint: its tag, epoch and generation."""
        self._require_running("record a commit")
        if not isinstance(tag, str) or not tag:
            raise ValueError(f"committed: tag must be a non-empty string; got {tag!r}")
        return self._update(
            last_tag=tag, last_epoch=check_count("committed: epoch", epoch, minimum=0),
            last_generation=check_count("committed: generation", generation, minimum=0))

    def finish(self, status: str, error: BaseException | None = None, *,
               suppress_errors: bool = False,
               compile: Mapping[str, Any] | None = None) -> AttemptRecord:
        """End the attempt as completed, failed or cancelled, recording ``error`` and,
        for a ``train(compile=...)`` fit, its compile record as of now (§28).

        With ``suppress_errors=True`` (the failure path) a problem recording the
        attempt is a RuntimeWarning, so it never replaces the training error.
        """
        try:
            self._require_running("finish it again")
            check_choice("finish: status", status, FINAL_STATUSES)
            if error is not None and not isinstance(error, BaseException):
                raise ValueError(f"finish: error must be an exception; got {error!r}")
            if error is not None and status == "completed":
                raise ValueError("finish: a completed attempt records no error")
            extra = {} if compile is None else {"compile": compile}
            return self._update(
                **extra, status=status, finished_at=_now(),
                error_type=None if error is None else _error_type(error),
                error_message=None if error is None else str(error))
        except Exception as exc:
            if not suppress_errors:
                raise
            warnings.warn(f"could not record attempt {self.attempt_id} as {status} in "
                          f"{self.run_dir / ATTEMPT_FILE}: {exc}", RuntimeWarning, stacklevel=2)
            return self._record

    def __repr__(self) -> str:
        return f"Attempt(attempt_id={self.attempt_id!r}, status={self.status!r})"


def begin_attempt(run_dir: str | os.PathLike[str], manifest: ExperimentManifest, *,
                  parent: Mapping[str, Any] | None = None) -> Attempt:
    """Start an attempt of ``manifest`` in ``run_dir``.

    provenance.json is written only when absent; an equal manifest there is
    left untouched, a different (or unverifiable) one raises ValueError.
    ``parent`` links a resumed attempt to its source, e.g. ``{"run_id": ...,
    "attempt_id": ..., "checkpoint": "last", "generation": 3}``.
    """
    if not isinstance(manifest, ExperimentManifest):
        raise TypeError(f"begin_attempt needs an ExperimentManifest; "
                        f"got {type(manifest).__name__}")
    record = AttemptRecord(attempt_id=uuid.uuid4().hex, fingerprint=manifest.fingerprint,
                           status="running", started_at=_now(), parent=parent)
    path = Path(run_dir)
    path.mkdir(parents=True, exist_ok=True)
    target = path / PROVENANCE_FILE
    if target.exists():
        try:
            existing = load_manifest(target)
        except Exception as exc:
            raise ValueError(f"{target} cannot be verified ({exc}); refusing to replace "
                             "the run's provenance") from None
        if existing != manifest:
            raise ValueError(f"{target} records another experiment (fingerprint "
                             f"{existing.fingerprint}, not {manifest.fingerprint}); "
                             "provenance.json is never rewritten")
    else:
        write_json(target, {"fingerprint": manifest.fingerprint,
                            "manifest": manifest.document()})
    write_json(path / ATTEMPT_FILE, record.state())
    return Attempt(path, record)
