"""Train-only preprocessing: raw and transformed views (spec §13.4).

:class:`Standardizer` fits float64 statistics on the training rows only and
applies them with a declared schema; :class:`SplitView` gives one split of a
base dataset its own input transform without touching the base.
"""

from nnx.preprocessing._schema import PreprocessingError
from nnx.preprocessing.standardizer import FORMAT, Standardizer
from nnx.preprocessing.views import SplitView, describe_transform

__all__ = ["FORMAT", "PreprocessingError", "SplitView", "Standardizer", "describe_transform"]
