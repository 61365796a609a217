"""The search's own refusals (spec §29)."""

from __future__ import annotations

from typing import Any

__all__ = ["SearchConfigurationError", "StudyMismatchError"]


class SearchConfigurationError(ValueError):
    """A configuration error: ``apply`` raising or returning something other than a plan,
    or a plan the search cannot score. Raised after the trial that met it was recorded as
    failed (it counts against the budget); ``.result`` is the search so far and
    ``.outcome`` that trial."""

    def __init__(self, message: str, *, result: Any = None, outcome: Any = None) -> None:
        super().__init__(message)
        self.result = result
        self.outcome = outcome


class StudyMismatchError(ValueError):
    """A stored study was created for another space, monitor or plan; raised before any
    trial, naming each differing field in ``.fields`` (``("identity",)``: the study has
    no nnx.search identity, or it changed since this worker claimed it)."""

    def __init__(self, study_name: str, fields: tuple[str, ...]) -> None:
        self.study_name = study_name
        self.fields = fields
        super().__init__(
            f"stored study {study_name!r} was created for another {', '.join(fields)}: "
            "continue it with the same space, monitor and plan, or name a new study")
