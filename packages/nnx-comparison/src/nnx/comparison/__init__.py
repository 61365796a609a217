"""Multi-seed summaries and paired comparisons (spec §23), read-only.

One seed is one draw. :func:`observations_from_runs` reads one :class:`Observation` per
run from run ids alone (run.yaml, the history up to the committed epoch, provenance;
nothing unpickled). :func:`summarize` gives a :class:`Summary` of :class:`GroupSummary`
(n, mean, std with n - 1, attempts, failed and non-finite ones listed) per poolable group;
:func:`compare` pairs two groups replicate by replicate into a
:class:`PairedComparison` (delta = B - A, optional :class:`Bootstrap` interval);
:class:`ComparisonReport` renders rows and text and saves ``nnx.comparison/1`` JSON.
NumPy and nnx-core only. Nothing here builds a model, reads a checkpoint, elects
runs/best or writes into a run.
"""

from nnx.comparison.bootstrap import Bootstrap, Interval
from nnx.comparison.errors import (
    ComparisonError,
    DuplicateObservationError,
    LineageError,
    PairingError,
    PoolingError,
    ReportIntegrityError,
)
from nnx.comparison.lineage import MAX_ANCESTORS
from nnx.comparison.observation import DIRECTIONS, POOL_FIELDS, STATUSES, Metric, Observation
from nnx.comparison.pairing import PAIR_STATUSES, Pair, PairedComparison, Unmatched, compare
from nnx.comparison.report import FORMAT, ComparisonReport
from nnx.comparison.runs import NATURAL_DIRECTIONS, observations_from_runs
from nnx.comparison.summary import GroupSummary, Summary, summarize
from nnx.comparison.values import SELECTIONS, SPLITS

__all__ = [
    "DIRECTIONS",
    "FORMAT",
    "MAX_ANCESTORS",
    "NATURAL_DIRECTIONS",
    "PAIR_STATUSES",
    "POOL_FIELDS",
    "SELECTIONS",
    "SPLITS",
    "STATUSES",
    "Bootstrap",
    "ComparisonError",
    "ComparisonReport",
    "DuplicateObservationError",
    "GroupSummary",
    "Interval",
    "LineageError",
    "Metric",
    "Observation",
    "Pair",
    "PairedComparison",
    "PairingError",
    "PoolingError",
    "ReportIntegrityError",
    "Summary",
    "Unmatched",
    "compare",
    "observations_from_runs",
    "summarize",
]
