"""What nnx.vis_utils reads and writes on disk: runs through ``nnx.NNRun`` and the
journal readers of ``nnx.history``, and a figure as one self-contained HTML file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from nnx import NNRun
from nnx.extend import atomic_write_text

__all__ = ["load_run", "write_html"]


def load_run(owner: str, run: Any, root: str | os.PathLike[str]) -> Any:
    """``run`` itself when it is an ``NNRun``, else the run with that id under ``root``."""
    if isinstance(run, NNRun):
        return run
    if not isinstance(run, str):
        raise TypeError(f"{owner}: run must be an NNRun or a run id; got {type(run).__name__}")
    return NNRun.load(run, root=root)


def write_html(figure: Any, path: str | os.PathLike[str]) -> Path:
    """``figure`` as one HTML page holding plotly.js itself (no ``<script src>``: it opens
    offline and travels as one file), written atomically; the path written."""
    import plotly.io as pio  # the caller has already asked extras.plotly for it

    page = pio.to_html(figure, include_plotlyjs=True, full_html=True, validate=True)
    return atomic_write_text(path, page)
