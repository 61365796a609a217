"""What Optuna logs for the trials search() ends as failed.

Optuna logs every failed trial as a warning carrying the objective's traceback. For a
trial NNx ends on purpose (a slot given back because another worker took the last one;
a configuration error, which search() raises itself right after) that traceback is
NNx's own raise statement and reads like a crash: those records are dropped. Every other
failure keeps Optuna's warning: a fit that raised shows the fit's own traceback instead
of NNx's, and a trial with no score (``no_value``) its one-line reason.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["Recorded", "quiet_refusals"]

# The logger of Optuna's trial loop (optuna.study._optimize), which logs failed trials.
_OPTIMIZE_LOGGER = "optuna.study._optimize"
_FAILED = re.compile(r"Trial (\d+) failed with ")


class Recorded(Exception):
    """Ends a trial Optuna records as failed, its outcome already kept. ``quiet``: a
    refusal NNx makes on purpose (nothing logged); ``cause``: the fit's own exception."""

    def __init__(self, message: str, *, quiet: bool,
                 cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.quiet, self.cause = quiet, cause

    def __repr__(self) -> str:  # Optuna logs repr(error): the reason, not this class
        return str(self)


class _Filter(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.silenced: set[str] = set()  # trial numbers whose failure is NNx's refusal

    def filter(self, record: logging.LogRecord) -> bool:
        found = _FAILED.match(record.getMessage())
        if found is None:
            return True
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, Recorded):
            if error.quiet:
                self.silenced.add(found.group(1))
                return False
            cause = error.cause
            record.exc_info = (None if cause is None else
                               (type(cause), cause, cause.__traceback__))
            record.exc_text = None
            return True
        # Optuna's second line for the same trial ("failed with value None").
        return found.group(1) not in self.silenced


@contextmanager
def quiet_refusals() -> Iterator[None]:
    """Around ``study.optimize``: drop Optuna's failure records of NNx's own refusals."""
    logger = logging.getLogger(_OPTIMIZE_LOGGER)
    installed = _Filter()
    logger.addFilter(installed)
    try:
        yield
    finally:
        logger.removeFilter(installed)
