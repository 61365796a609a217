"""Optional dependencies (the ``nnx-core[<extra>]`` extras): checked early, imported late.

A logger callback checks at construction that its extra is installed, so a
missing extra fails before any run is reserved, and imports it only when the
run begins, so ``import nnx.callbacks`` never pays for TensorBoard or W&B. The
Hub reader (``hub``) and ``NNModel.to_onnx`` (``onnx``) import theirs the same
way, on first use.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__all__ = ["import_extra", "require_extra"]


def _missing(owner: str, module: str, extra: str) -> ImportError:
    return ImportError(f'{owner} needs the {module!r} package; install it with '
                       f'pip install "nnx-core[{extra}]"')


def require_extra(owner: str, module: str, extra: str) -> None:
    """Raise ImportError naming ``pip install "nnx-core[<extra>]"`` unless ``module`` is
    importable (found without importing it)."""
    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a broken parent package, or a module without spec
        found = False
    if not found:
        raise _missing(owner, module, extra)


def import_extra(owner: str, module: str, extra: str, *, package: str | None = None) -> Any:
    """Import ``module``, typed ``Any`` (NNx relies on no stubs of the extras).

    ``package`` is the distribution the error names when it differs from
    ``module`` (``torch.utils.tensorboard`` needs ``tensorboard``).
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise _missing(owner, package or module, extra) from exc
