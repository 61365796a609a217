"""The optional packages nnx.viz draws with, imported by the call that needs them.

Plotly (a dependency), torchinfo, Captum, Netron, pandas and scikit-learn (the
``torchinfo``, ``captum``, ``netron``, ``tabular`` and ``tsne`` extras) are imported only
inside the entry point that uses them, so ``import nnx.viz`` / ``nnx.vis_utils`` needs
none of them, and ``summary`` and ``classification_report`` work without Plotly (§12).
Each entry point asks for all of its packages before it reads its arguments: a missing
one is an ImportError naming the install, and the model is never touched.
"""

from __future__ import annotations

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


# Each import below is inside its function on purpose: the package is optional (or, for
# Plotly, unneeded by summary), and importing it here would make `import nnx.viz` fail
# or pay for it where it is absent.
def plotly(owner: str) -> tuple[Any, Any]:
    """``(plotly.graph_objects, plotly.subplots)``."""
    try:
        import plotly.graph_objects as go
        import plotly.subplots as subplots
    except ImportError as exc:
        raise _missing(owner, "plotly", exc) from exc
    return go, subplots


def torchinfo(owner: str) -> Any:
    try:
        import torchinfo as module
    except ImportError as exc:
        raise _missing(owner, "torchinfo", exc) from exc
    return module


def captum_attr(owner: str) -> Any:
    """``captum.attr``, where the six attribution methods live."""
    try:
        import captum.attr as module
    except ImportError as exc:
        raise _missing(owner, "captum", exc) from exc
    return module


def netron(owner: str) -> Any:
    try:
        import netron as module
    except ImportError as exc:
        raise _missing(owner, "netron", exc) from exc
    return module


def pandas(owner: str) -> Any:
    """pandas, for ``classification_report``'s DataFrame (core's ``tabular`` extra)."""
    try:
        import pandas as module
    except ImportError as exc:
        raise _missing(owner, "pandas", exc) from exc
    return module


def sklearn_tsne(owner: str) -> Any:
    """``sklearn.manifold.TSNE``, the embedding behind the t-SNE of checkpoint logits."""
    try:
        from sklearn.manifold import TSNE
    except ImportError as exc:
        raise _missing(owner, "scikit-learn", exc) from exc
    return TSNE
