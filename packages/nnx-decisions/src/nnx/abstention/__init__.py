"""Abstention and risk-coverage (spec §19): decline the rows a classifier is unsure of,
and measure what that costs and buys.

:class:`AbstentionPolicy` (``max_probability`` or ``margin``, a threshold, the label
order, model id, tuning split and the probability field it reads) ``apply``-s to a
CalibratedPrediction (§18), a categorical PredictionResult or arrays, giving an
:class:`AbstentionResult`; its ``report(targets)`` is a :class:`CoverageReport`
(coverage over every row, selective risk over the accepted ones, None with status
``no_accepted``) and ``accepted_rows(targets)`` the only rows a hard-label report may
see. :class:`CoverageAccumulator` aggregates chunks to the eager report;
:func:`select_threshold` tunes a threshold on a validation split (never the test split)
and :func:`risk_coverage_curve` lists every candidate with the accept-none endpoint.
Policies are ``nnx.abstention/1`` JSON. :func:`decide` applies a policy to a typed
decision (§17), returning the provider's ChoiceResult unchanged inside a
:class:`SelectiveDecision`.
"""

from nnx.abstention.accumulator import CoverageAccumulator
from nnx.abstention.errors import AbstentionError, AbstentionSchemaError
from nnx.abstention.inputs import FIELDS
from nnx.abstention.policy import KINDS, REASONS, AbstentionPolicy, decide
from nnx.abstention.report import (
    AbstentionResult,
    AcceptedRows,
    CoverageReport,
    SelectiveDecision,
)
from nnx.abstention.selection import (
    MAX_DEFAULT_CANDIDATES,
    CandidatePoint,
    RiskCoverageCurve,
    ThresholdSelection,
    risk_coverage_curve,
    select_threshold,
)

__all__ = [
    "FIELDS",
    "KINDS",
    "MAX_DEFAULT_CANDIDATES",
    "REASONS",
    "AbstentionError",
    "AbstentionPolicy",
    "AbstentionResult",
    "AbstentionSchemaError",
    "AcceptedRows",
    "CandidatePoint",
    "CoverageAccumulator",
    "CoverageReport",
    "RiskCoverageCurve",
    "SelectiveDecision",
    "ThresholdSelection",
    "decide",
    "risk_coverage_curve",
    "select_threshold",
]
