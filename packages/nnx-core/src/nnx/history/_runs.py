"""Finding a run's directory (a run id, ``"best"`` or a path) and reading its YAML files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nnx._foundation.bounded import load_yaml
from nnx._foundation.safe_paths import check_inside
from nnx._persistence.best_pointer import resolve_best

__all__ = ["RunRef", "read_yaml", "resolve_run"]

RunRef = str | os.PathLike[str]


def resolve_run(run: RunRef, root: str | os.PathLike[str]) -> Path:
    """``root/<id>`` for a run id (``"best"``: the run runs/best names, by name, and no
    symbolic link below the root followed), else ``run`` itself as a directory."""
    if isinstance(run, str) and (Path(root) / run).is_dir():
        named = resolve_best(run, root)
        return Path(os.path.realpath(Path(root))) / check_inside(root, Path(root) / named).name
    path = Path(run)
    if path.is_dir():
        return Path(os.path.realpath(path))
    raise FileNotFoundError(f"no run {os.fspath(run)!r} (neither {Path(root) / run} nor a "
                            "run directory)")


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping, or {} when the file is missing, unreadable (too large or nested
    too deeply included: the bounded reader) or not a mapping."""
    try:
        doc = load_yaml(path)
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}
