"""The environment snapshot written to metadata.yaml: where a run ran, never its id."""

from __future__ import annotations

import functools
import os
import platform
import subprocess
from importlib import metadata
from typing import Any

__all__ = ["environment_snapshot"]


def _git_commit() -> str | None:
    """HEAD of the working directory's repository, probed once per process and directory:
    a subprocess costs milliseconds, and every run's setup asks."""
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory is gone: no repository to name
        return None
    return _git_commit_in(cwd)


@functools.lru_cache(maxsize=8)
def _git_commit_in(cwd: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=2, check=False,
            cwd=cwd)
    except (OSError, subprocess.SubprocessError):
        return None
    commit = out.stdout.strip()
    return commit if out.returncode == 0 and commit else None


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def environment_snapshot() -> dict[str, Any]:
    """Library versions, Python, OS, devices and the git commit of the working directory."""
    import torch

    snapshot: dict[str, Any] = {
        "nnx": _version("nnx-core"),
        "torch": str(torch.__version__),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cuda": str(torch.version.cuda) if torch.cuda.is_available() else None,
        "gpus": [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())],
    }
    commit = _git_commit()
    if commit:
        snapshot["git_commit"] = commit
    return snapshot
