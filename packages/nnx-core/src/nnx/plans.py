"""Experiment plans (spec §20): ``ExperimentPlan`` and what it hands out.

The public face of :mod:`nnx._surface.plans` and :mod:`nnx._surface.plan_types`;
the code lives there (docs/architecture.md).
"""

from nnx._surface.plan_types import Diagnostic as Diagnostic
from nnx._surface.plan_types import FitResult as FitResult
from nnx._surface.plan_types import PlanData as PlanData
from nnx._surface.plan_types import PlanError as PlanError
from nnx._surface.plan_types import PlanValidation as PlanValidation
from nnx._surface.plan_types import ProbeResult as ProbeResult
from nnx._surface.plan_types import ResumeRequest as ResumeRequest
from nnx._surface.plan_types import SplitMetrics as SplitMetrics
from nnx._surface.plans import ExperimentPlan as ExperimentPlan

__all__ = ["Diagnostic", "ExperimentPlan", "FitResult", "PlanData", "PlanError",
           "PlanValidation", "ProbeResult", "ResumeRequest", "SplitMetrics"]
