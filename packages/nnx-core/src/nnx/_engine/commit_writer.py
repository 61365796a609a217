"""Where an epoch's commit is written: on a background thread, or inline (docs/durability.md).

The training thread stages what a commit writes (CPU copies, records, decisions: see
:mod:`nnx._engine.commit_stage`) and hands the writing here. With ``background=True``
one thread per commit writes it while the next epoch trains; at most one commit is in
flight, so handing over the next one first waits for the previous one (back-pressure:
one staged copy in memory). An error of the writing is kept and raised in the training
thread the next time it asks (:meth:`check`, :meth:`wait`, :meth:`submit`): the same
exception object the inline commit would have raised.

A thread per commit rather than a long-lived worker: nothing waits on an empty queue,
so an interpreter that exits with a commit in flight finishes writing it (the thread
is not a daemon) and then exits. Signals reach only the main thread, so a Ctrl-C never
interrupts the writing itself; the training thread waits for it before it unwinds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["CommitWriter"]


class CommitWriter:
    """Runs one commit job at a time: on its own thread (``background``) or inline."""

    def __init__(self, *, background: bool) -> None:
        self.background = background
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def in_flight(self) -> bool:
        """Whether a commit is being written now."""
        return self._thread is not None and self._thread.is_alive()

    def submit(self, job: Callable[[], None]) -> None:
        """Write ``job`` once the previous commit is durable (its error raised here)."""
        self.wait()
        if not self.background:
            job()
            return
        thread = threading.Thread(target=self._run, args=(job,), name="nnx-commit",
                                  daemon=False)
        self._thread = thread
        thread.start()

    def _run(self, job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as exc:  # handed to the training thread, never lost
            self._error = exc

    def wait(self) -> None:
        """Return once no commit is in flight; raise the error of one that failed."""
        thread = self._thread
        if thread is not None:
            thread.join()  # a Ctrl-C here leaves the thread known: it is waited for again
            self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise error

    def check(self) -> None:
        """Raise the error of a commit that already failed, without waiting for one
        still being written."""
        if self._thread is None or not self._thread.is_alive():
            self.wait()
