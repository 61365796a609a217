"""The one path rule under a runs root (docs/durability.md, The path rule).

Every file NNx writes or reads under a runs root is reached from the root by
plain names (a run id, ``checkpoints``, a tag's file name, a shard name), and no
existing component below the root is a symbolic link. A name with a separator,
NUL, ``.`` or ``..`` is refused by :func:`~nnx._foundation.validation.check_run_id`
(the one name check); a symlink is refused naming the link, so a planted
``runs/.leases -> /elsewhere`` or ``.best-score.json -> ~/.bashrc`` never makes
NNx create, change or delete anything outside the root, and a planted
``checkpoints -> /elsewhere`` is never read as the run's own.

The root itself may be a symlink (``runs -> /data/runs`` is the user's choice),
and so may anything above it. ``runs/best`` is NNx's own symlink: it is read by
its target's *name* (a sibling run), never followed as a path.

Checks are made right before the operation. A local process that swaps a
directory for a link between the check and the open is outside the threat model
(docs/durability.md); lock files and temps are opened with ``O_NOFOLLOW`` /
``O_EXCL`` where the platform has them, which closes that window for the final
component.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nnx._foundation.validation import check_run_id

__all__ = ["UnsafePathError", "check_inside", "inside", "is_link"]


class UnsafePathError(ValueError):
    """A path under a runs root that would leave it: a symlink below the root, or a name
    that is not one plain entry. ``path`` is what was asked for, ``link`` the link found
    (None for a bad name)."""

    def __init__(self, message: str, *, path: Path, link: Path | None = None) -> None:
        super().__init__(message)
        self.path, self.link = path, link


def is_link(path: Path) -> bool:
    """Whether ``path`` itself is a symlink (a missing path is not)."""
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def check_inside(root: str | os.PathLike[str], path: str | os.PathLike[str]) -> Path:
    """``path``, after checking that it lies lexically under ``root`` and that no existing
    component from below ``root`` down to ``path`` itself is a symlink. Returns ``path``."""
    base, target = Path(root), Path(path)
    try:
        relative = target.relative_to(base)
    except ValueError:
        raise UnsafePathError(f"{target.as_posix()} is not under the runs root "
                              f"{base.as_posix()}", path=target) from None
    current = base
    for part in relative.parts:
        if part in ("", ".", ".."):
            raise UnsafePathError(f"{target.as_posix()} leaves the runs root {base.as_posix()} "
                                  f"through {part!r}", path=target)
        current = current / part
        if is_link(current):
            raise UnsafePathError(
                f"{current.as_posix()} is a symbolic link (to {os.readlink(current)!r}); NNx "
                f"never follows links below the runs root {base.as_posix()}: remove it",
                path=target, link=current)
    return target


def inside(root: str | os.PathLike[str], *names: str, what: str = "name",
           links: bool = False) -> Path:
    """``root / names...``: each name one plain entry (the run-id rule), no component
    below ``root`` a symlink (:func:`check_inside`). ``links=True`` checks the names only:
    for a directory that is not a runs root and links its files by design (a Hugging
    Face cache snapshot links each file into its blob store)."""
    base = Path(root)
    for name in names:
        try:
            check_run_id(what, name, what=what)
        except ValueError as exc:
            raise UnsafePathError(str(exc), path=base.joinpath(*map(str, names))) from None
    joined = base.joinpath(*names)
    return joined if links else check_inside(base, joined)
