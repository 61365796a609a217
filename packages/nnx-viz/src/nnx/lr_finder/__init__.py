"""nnx.lr_finder: Smith's LR range test before a long run (spec §13.1).

``from nnx import lr_finder``; ``lr_finder(net, loader, loss_fn=...)`` sweeps the rate
geometrically over ``num_iter`` batches and returns an :class:`LRFinderResult` with the
suggested ``max_lr`` (steepest descent of the EMA-smoothed loss), the series and a
Plotly figure. The sweep is non-destructive: weights, buffers, modes, the loader's
generators and every RNG stream are restored on exit, also on error. See docs/viz.md
and :func:`nnx.lr_finder.sweep.lr_range_test` (what a call runs).

``nnx.lr_finder`` names both this package (spec §12's subpackage) and the call (§13.1's
``from nnx import lr_finder``). Python binds ``nnx.lr_finder`` to the package whenever
the package is imported, so a separate function of that name would be reachable or not
depending on import order. Instead the package is the call: it is callable, and
``lr_finder`` (here and as nnx's export) is the package itself, in every order.
"""

import inspect
import sys
import types

from nnx.lr_finder.errors import LRSweepError
from nnx.lr_finder.report import LRFinderResult
from nnx.lr_finder.sweep import lr_range_test

__all__ = ["LRFinderResult", "LRSweepError", "lr_finder", "lr_range_test"]


class _CallablePackage(types.ModuleType):
    """This package's type: calling it runs :func:`lr_range_test` (same signature)."""

    __call__ = staticmethod(lr_range_test)


#: What ``inspect.signature(nnx.lr_finder)`` reports (help(), IDEs): the call's own.
__signature__ = inspect.signature(lr_range_test)
sys.modules[__name__].__class__ = _CallablePackage
lr_finder: _CallablePackage = sys.modules[__name__]  # type: ignore[assignment]
