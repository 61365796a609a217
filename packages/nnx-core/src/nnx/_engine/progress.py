"""The progress bar: epoch, batch, loss and the monitored value (tqdm).

It is on only when stderr is a terminal (or ``verbose=True``) and off with
``verbose=False``; off, it costs nothing per batch.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from nnx._foundation.records import NNIterationDataPoint, first_finite

__all__ = ["Progress"]


class Progress:
    def __init__(self, n_epochs: int, loader: Any, *, verbose: bool | None) -> None:
        enabled = sys.stderr.isatty() if verbose is None else verbose
        self.bar: Any = None
        self.n_epochs = n_epochs
        self.monitored = "-"
        self._epoch: int | None = None  # the epoch the description shows
        if enabled:
            from tqdm.auto import tqdm

            try:
                total: int | None = n_epochs * len(loader)
            except TypeError:
                total = None
            self.bar = tqdm(total=total, unit="batch", dynamic_ncols=True, leave=True)

    def batch(self, epoch: int, loss: float | None) -> None:
        if self.bar is None:
            return
        if epoch != self._epoch:
            self._epoch = epoch
            self.bar.set_description(f"epoch {epoch + 1}/{self.n_epochs}", refresh=False)
        shown = "-" if loss is None else f"{loss:.4f}"  # drawn at tqdm's own redraw rate
        self.bar.set_postfix_str(f"loss {shown} | {self.monitored}", refresh=False)
        self.bar.update(1)

    def epoch_done(self, epoch: int, idp: NNIterationDataPoint) -> None:
        if self.bar is None:
            return
        selection = idp.selection
        if selection is not None:  # a named monitor: show its value
            value = selection.value
            if value is not None and math.isfinite(value):
                self.monitored = f"{selection.key} {value:.4f}"
            return
        found = first_finite(idp)
        if found is not None and math.isfinite(found[1]):
            self.monitored = f"{found[0]} {found[1]:.4f}"

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
