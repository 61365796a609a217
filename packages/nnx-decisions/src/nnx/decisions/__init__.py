"""Typed decisions (spec §17): provider-neutral questions, validated labelled answers.

Questions are :class:`Choice` (2+ options), :class:`Boolean` (one ``p_true``) and
:class:`Score` (2+ ordered levels), each with a ``digest()``. A
:class:`DecisionProvider` declares :class:`Capabilities` (``check`` raises
:class:`UnsupportedCapability` before any model call) and answers through the one
:func:`validate_response` (request order, never renormalized), giving
:class:`ChoiceResult` / :class:`BooleanResult` / :class:`ScoreResult` (over many rows,
FixedHeadProvider's :class:`DecisionResults` builds each when it is read).
:class:`FixedHeadProvider` serves a trained NNModel's head; :class:`JevProvider` (the
``jev`` extra) hosted Jev models through the TypeSafe SDK. A :class:`DecisionJob`
(``DecisionJob.ask / collect``, ``.map``, ``.then``; ``Job`` is its alias) describes
several questions before any is asked; ``run`` / ``arun`` are its only effects.
:func:`validate_decision_request_result` and :func:`decide_result` are the §27
errors-as-values wrappers; :func:`teacher_records` turns answers into
``nnx.teacher-record/1`` records for offline distillation (§10.1). Importing this
package starts no backend and needs no hosted SDK.
"""

from nnx.decisions.boundaries import decide_result, validate_decision_request_result
from nnx.decisions.errors import (
    DecisionError,
    InvalidDecisionRequest,
    InvalidDecisionResponse,
    JevError,
    ProviderFailure,
    UnsupportedCapability,
)
from nnx.decisions.fixed_head import FixedHeadProvider
from nnx.decisions.jev import JevProvider
from nnx.decisions.job_results import OUTCOMES, JobCancelled, JobFailed, JobResult
from nnx.decisions.jobs import DecisionJob, Follow, Job
from nnx.decisions.provider import Capabilities, DecisionProvider, Limits
from nnx.decisions.questions import Boolean, Choice, Option, Question, Score, question_from_state
from nnx.decisions.result_rows import DecisionResults
from nnx.decisions.results import BooleanResult, ChoiceResult, DecisionResult, ScoreResult
from nnx.decisions.teacher import TEACHER_RECORD_FORMAT, save_teacher_records, teacher_records
from nnx.decisions.validation import SUM_TOLERANCE, validate_response

__all__ = [
    "OUTCOMES",
    "SUM_TOLERANCE",
    "TEACHER_RECORD_FORMAT",
    "Boolean",
    "BooleanResult",
    "Capabilities",
    "Choice",
    "ChoiceResult",
    "DecisionError",
    "DecisionJob",
    "DecisionProvider",
    "DecisionResult",
    "DecisionResults",
    "FixedHeadProvider",
    "Follow",
    "InvalidDecisionRequest",
    "InvalidDecisionResponse",
    "JevError",
    "JevProvider",
    "Job",
    "JobCancelled",
    "JobFailed",
    "JobResult",
    "Limits",
    "Option",
    "ProviderFailure",
    "Question",
    "Score",
    "ScoreResult",
    "UnsupportedCapability",
    "decide_result",
    "question_from_state",
    "save_teacher_records",
    "teacher_records",
    "validate_decision_request_result",
    "validate_response",
]
