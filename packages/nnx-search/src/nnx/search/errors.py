"""The search's own refusals (spec §29)."""

from __future__ import annotations

from typing import Any

__all__ = ["SearchConfigurationError", "SearchStorageError", "StudyMismatchError"]


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


class SearchStorageError(ValueError):
    """``storage=`` names a database that cannot be opened (an SQLite file in a directory
    that does not exist, a directory, a server that refuses the connection, a missing
    driver); raised before any study is created or loaded. ``.storage`` is the URL as
    given, its password hidden."""

    def __init__(self, storage: str, why: str) -> None:
        self.storage = storage
        super().__init__(f"search storage {storage!r}: {why}")
