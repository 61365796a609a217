"""The optional packages nnx.viz draws with, imported by the call that needs them.

Plotly (a dependency), torchinfo, Captum, Netron, pandas and scikit-learn (the
``torchinfo``, ``captum``, ``netron``, ``tabular`` and ``tsne`` extras) are imported only
inside the entry point that uses them, so ``import nnx.viz`` / ``nnx.vis_utils`` needs
none of them, and ``summary`` and ``classification_report`` work without Plotly (§12).
Each entry point asks for all of its packages before it reads its arguments: a missing
one is an ImportError naming the install, and the model is never touched.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["INSTALLS", "captum_attr", "netron", "pandas", "plotly", "sklearn_tsne", "torchinfo"]

#: Each optional package → the install that provides it.
INSTALLS = {
    "plotly": "pip install plotly",  # a dependency of nnx-viz: only a broken install lacks it
    "torchinfo": 'pip install "nnx-viz[torchinfo]"',
    "captum": 'pip install "nnx-viz[captum]"',
    "netron": 'pip install "nnx-viz[netron]"',
    "pandas": 'pip install "nnx-viz[tabular]"',
    "scikit-learn": 'pip install "nnx-viz[tsne]"',
}


def _missing(owner: str, package: str, exc: ImportError) -> ImportError:
    error = ImportError(f"{owner} needs the {package!r} package; install it with "
                        f"{INSTALLS[package]}")
    error.__cause__ = exc
    return error


def _load(owner: str, module: str, package: str) -> Any:
    """``module`` imported, or the ImportError naming the install of ``package``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise _missing(owner, package, exc) from exc


# Each package is imported by its function, on call, on purpose: it is optional (or, for
# Plotly, unneeded by summary), and importing it at module level would make
# `import nnx.viz` fail or pay for it where it is absent.
def plotly(owner: str) -> tuple[Any, Any]:
    """``(plotly.graph_objects, plotly.subplots)``."""
    return (_load(owner, "plotly.graph_objects", "plotly"),
            _load(owner, "plotly.subplots", "plotly"))


def torchinfo(owner: str) -> Any:
    return _load(owner, "torchinfo", "torchinfo")


def captum_attr(owner: str) -> Any:
    """``captum.attr``, where the six attribution methods live."""
    return _load(owner, "captum.attr", "captum")


def netron(owner: str) -> Any:
    return _load(owner, "netron", "netron")


def pandas(owner: str) -> Any:
    """pandas, for ``classification_report``'s DataFrame (core's ``tabular`` extra)."""
    return _load(owner, "pandas", "pandas")


def sklearn_tsne(owner: str) -> Any:
    """``sklearn.manifold.TSNE``, the embedding behind the t-SNE of checkpoint logits."""
    return _load(owner, "sklearn.manifold", "scikit-learn").TSNE
