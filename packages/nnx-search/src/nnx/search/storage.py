"""Opening the study's storage and naming a stored study search() was given no name for.

An RDB URL is opened here, not inside Optuna, so that a path or server that cannot be
used is refused by name (SearchStorageError) before any study exists, instead of
surfacing as a raw SQLAlchemy error from deep inside ``optuna.create_study``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import optuna
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from nnx.extend import canonical_bytes, sha256_hex
from nnx.search.errors import SearchStorageError

__all__ = ["derived_study_name", "open_storage"]


def _sqlite_problem(database: str | None) -> str | None:
    """Why an SQLite database path cannot hold a study (None when it can); reads only."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None  # in memory, or a URI filename SQLite resolves itself
    path = Path(database)
    if path.is_dir():
        return f"the SQLite database path {str(path)!r} is a directory"
    if not path.parent.is_dir():
        return (f"the directory {str(path.parent)!r} of the SQLite database "
                f"{str(path)!r} does not exist (create it first)")
    return None


def open_storage(storage: Any) -> Any:
    """A storage object for ``storage``: a URL string opened as Optuna's RDBStorage (its
    problems raised as SearchStorageError naming it); anything else as given."""
    if not isinstance(storage, str):
        return storage
    try:
        url = make_url(storage)
    except ArgumentError as exc:
        raise SearchStorageError(storage, f"not a database URL ({exc})") from None
    shown = url.render_as_string(hide_password=True)
    if url.get_backend_name() == "sqlite":
        problem = _sqlite_problem(url.database)
        if problem is not None:
            raise SearchStorageError(shown, problem)
    try:
        return optuna.storages.RDBStorage(storage)
    except (SQLAlchemyError, ImportError) as exc:  # ImportError: the URL's driver
        cause = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        raise SearchStorageError(
            shown, f"cannot be opened: {type(exc).__name__}: {cause}") from exc


def derived_study_name(identity: dict[str, str]) -> str:
    """The name of a stored study search() was given no ``study_name`` for: derived from
    what the study is for (space, monitor and direction, base plan), so that the same
    call reopens the same study (where Optuna would draw a random name nobody can
    reopen). Printed, so that it can be passed as ``study_name`` later."""
    name = "nnx-search-" + sha256_hex(canonical_bytes(
        {k: identity[k] for k in ("format", "space", "monitor", "plan")}))[:16]
    print(f"nnx.search: no study_name given; using {name!r}, derived from the space, "
          "monitor and plan (pass study_name= to choose one)", file=sys.stderr)
    return name
