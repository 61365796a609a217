r"""The public extension API: every name an add-on needs from nnx-core (docs/extending.md).

A thin face: each name is defined elsewhere in nnx-core and re-exported here
unchanged, so an add-on (and the reference plugin under
``tests-integration/example-plugin``) imports ``nnx.extend`` instead of a
``_``-prefixed module. Names:

* params: :class:`Params` (the config base), :func:`always`, :func:`runtime`,
  :func:`set_field`, :func:`enum_decoder`, :func:`encode`, :func:`frozen_mapping`,
  :func:`empty_mapping`, :func:`require_exact`;
* the one validator: ``check_*``, ``enum_spelling(s)``, :class:`Domain` and the
  domains ``NON_NEGATIVE``, ``POSITIVE``, ``PROBABILITY``, ``UNIT_HALF_OPEN``,
  ``OPEN_UNIT`` and ``MAX_SEED``;
* files: :func:`atomic_write`, :func:`atomic_write_bytes`, :func:`atomic_write_text`
  (the one atomic writer: temp beside the destination, flush, rename), so an add-on
  that saves a file (a tokenizer, an adapter) never writes a second one;
  :func:`load_json` (the bounded JSON reader: size and depth caps as ValueError) and
  :func:`inside` with :class:`UnsafePathError` (the path rule: plain names joined to a
  directory, no symbolic link below it), so an add-on that reads a directory of files
  (a Llama checkpoint's shards) reads it as core reads a run;
* probability terms, NumPy only: :func:`softmax64` (row-wise float64 softmax on a
  copy), :func:`nll_terms` (per-row ``-log p[target]``, floored at ``epsilon``,
  default :data:`METRIC_EPSILON` = 1e-12; ``None`` exact) and :func:`brier_terms`
  (per-row class-summed squared error): the terms the named ``nll`` / ``brier`` metrics
  average, so an add-on's report (``nnx.calibration``) equals them on the same
  probabilities;
* reading back: :func:`sha256_hex` (the one content digest), :func:`canonical_bytes`
  (the one canonical JSON encoding: sorted keys, compact, NaN refused; what an
  add-on digests to give an artifact an id), :func:`cause_line` (an
  underlying error on one line), :data:`BUILD_FAILURES` (what torch raises building a
  net a saved configuration declares with absurd sizes) and :func:`unbuildable` (the
  named error for it: ``CheckpointReadError`` naming the file), so an add-on's loader
  checks and reports a damaged file as core's loaders do;
* modes: :func:`preserved_state` (the §13.2 non-destructive contract: every
  submodule's train/eval flag restored, also on error), so an add-on's
  inference helper (``GenerativeNNModel.generate``) restores modes as core's do;
* nets: :class:`NetRegistration` (an ``nnx.nets`` entry point's value);
  :func:`net_class_axis` (a net's declared ``class_axis``: which output axis holds the
  classes, e.g. ``-1`` for ``(batch, seq, vocab)`` logits) and :func:`decode_on_axis`
  (a decoder that reads axis 1 applied on that axis), so an add-on's predictor decodes
  as ``predict()`` does;
* registries: ``register_*`` / ``registered_*`` / ``unregister_*`` for model
  factories, optimizer factories, metrics (with :class:`MetricRegistration`)
  and transforms, and :class:`MissingDistributionError` (with its attribute-access
  twin :class:`MissingDistributionAttributeError`);
* protocols: :class:`Component` (with :class:`ComponentSpec`), :class:`Task` (with its
  defaults: :func:`resolve_task` and :class:`TaskRuntime`, the per-batch machinery core
  builds around a task object) and :class:`TrainableModel` (what the engine reads of a
  model: type steps against it);
* objectives: :class:`Objective`, :class:`LossTerm`, :class:`ObjectiveResult`,
  :class:`ObjectiveContext` (the objective context), :class:`UpdateEvent`,
  :class:`ObjectiveStream`, :class:`FrozenTeacher` and :func:`distillation_loss` (the
  one KD soft term); for a hand-written step: :func:`imperative_step`,
  :func:`finalize_step` / :class:`FinalizedStep`, :func:`train_mode`,
  :func:`full_precision_only`, and :func:`supervised_loss` / :class:`SupervisedLoss` (a
  supervised term through the task adapter as the default step computes it: torch's
  mean, the loss read once, the record's label counting deferred to the commit);
* net params: :class:`NNParams` with its public hooks ``validate``, ``omit_from_state``
  and ``field_name``;
* transform recipes: :class:`TransformRecipe` and :func:`config_targets`, and
  :class:`RecognizingTransform` (an op that also recognises its modules in a net
  changed in place, so ``train`` records that change as the run's recipe);
* run bundles (spec §22): :class:`BundleCalibrator` (what a calibrator shows a bundle:
  ``to_json()``, ``labels``, ``num_classes``, ``model_id``), :func:`model_fingerprint`
  (the weights digest a bundle recomputes from its payload) and
  ``register_calibrator_reader`` / ``registered_calibrator_readers`` /
  ``unregister_calibrator_reader`` with :data:`CalibratorReader` (how a record of a
  format, ``nnx.calibration/1``, becomes an object again on reconstruction);
* reading runs without unpickling (a read-only report over many runs, ``nnx.comparison``):
  :func:`load_yaml` (the bounded YAML reader, for run.yaml and metadata.yaml),
  :func:`read_provenance` with :class:`RunProvenance` and :class:`AttemptRecord` (a run's
  verified provenance.json and attempt.json, spec §4.4) and :func:`epoch_ends` (each
  epoch's last record from idps.csv or the journal, cut at an epoch the caller knows, no
  checkpoint opened);
* crossing to another add-on: :func:`require_distribution` (the one install hint);
* errors as values (spec §27): :class:`Ok`, :class:`Err`, :data:`Result` and
  :class:`BoundaryError`, so an add-on's boundary wrapper (nnx.decisions'
  ``decide_result``) returns core's own Result types;
* driving the epoch loop with a run of one's own (an LR sweep, a search trial):
  :func:`run_fit_loop` given an :class:`UpdateOwner` (it reads the loop through
  :class:`LoopView` and returns an :class:`OwnerBuild` of :class:`OptimizerSlot`\ s and
  a :class:`ResolvedPrecision` from :func:`resolve_precision`), never a subclass of the
  loop;
* fitting experiment plans from an add-on (a search's trials): :class:`ExperimentPlan`
  and :class:`PlanError` (spec §20), :func:`refuse_multi_rank` (the one refusal of a
  torchrun process group that ``ExperimentPlan.fit`` raises, so a caller that drives many
  fits refuses first, before it opens anything) and :func:`metric_modes` (each declared
  metric's natural direction, which a monitor without ``mode`` takes).
"""

from __future__ import annotations

from nnx._contracts.calibrators import (
    BundleCalibrator,
    CalibratorReader,
    model_fingerprint,
    register_calibrator_reader,
    registered_calibrator_readers,
    unregister_calibrator_reader,
)
from nnx._contracts.components import Component, ComponentSpec
from nnx._contracts.precision import ResolvedPrecision, resolve_precision
from nnx._contracts.trainable import TrainableModel
from nnx._engine.fit_loop import run_fit_loop
from nnx._engine.optimizer_factories import (
    register_optimizer_factory,
    registered_optimizer_factories,
    unregister_optimizer_factory,
)
from nnx._engine.prediction import decode_on_axis, net_class_axis
from nnx._engine.step_helpers import (
    FinalizedStep,
    SupervisedLoss,
    finalize_step,
    full_precision_only,
    supervised_loss,
    train_mode,
)
from nnx._engine.update_engine import OptimizerSlot
from nnx._engine.update_owner import LoopView, OwnerBuild, UpdateOwner
from nnx._foundation.atomic import atomic_write, atomic_write_bytes, atomic_write_text
from nnx._foundation.bounded import load_json, load_yaml
from nnx._foundation.config_base import (
    Params,
    always,
    empty_mapping,
    encode,
    enum_decoder,
    frozen_mapping,
    require_exact,
    runtime,
    set_field,
)
from nnx._foundation.hashing import canonical_bytes, sha256_hex
from nnx._foundation.modes import preserved_state
from nnx._foundation.plugins import (
    MissingDistributionAttributeError,
    MissingDistributionError,
    require_distribution,
)
from nnx._foundation.result import BoundaryError, Err, Ok, Result
from nnx._foundation.safe_paths import UnsafePathError, inside
from nnx._foundation.validation import (
    MAX_SEED,
    NON_NEGATIVE,
    OPEN_UNIT,
    POSITIVE,
    PROBABILITY,
    UNIT_HALF_OPEN,
    Domain,
    check_batch_sizes,
    check_choice,
    check_count,
    check_counts,
    check_enum,
    check_optional_count,
    check_optional_real,
    check_optional_str,
    check_real,
    check_run_id,
    check_seed,
    check_spec_config,
    check_spec_id,
    enum_spelling,
    enum_spellings,
)
from nnx._journal.reader import epoch_ends
from nnx._persistence.read_errors import BUILD_FAILURES, cause_line, unbuildable
from nnx._surface.plan_types import PlanError
from nnx._surface.plans import ExperimentPlan, refuse_multi_rank
from nnx.enums.nets import NetRegistration
from nnx.metrics.registry import (
    MetricRegistration,
    metric_modes,
    register_metric,
    registered_metrics,
    unregister_metric,
)
from nnx.metrics.terms import METRIC_EPSILON, brier_terms, nll_terms, softmax64
from nnx.models import register_model_factory, registered_model_factories, unregister_model_factory
from nnx.objectives._core import (
    LossTerm,
    Objective,
    ObjectiveContext,
    ObjectiveResult,
    UpdateEvent,
)
from nnx.objectives.kd import distillation_loss
from nnx.objectives.ownership import imperative_step
from nnx.objectives.stream import ObjectiveStream
from nnx.objectives.teacher import FrozenTeacher
from nnx.params.net import NNParams
from nnx.provenance import AttemptRecord, RunProvenance, read_provenance
from nnx.tasks.protocol import Task
from nnx.tasks.runtime import TaskRuntime, resolve_task
from nnx.transforms import register_transform, registered_transforms, unregister_transform
from nnx.transforms.live import RecognizingTransform
from nnx.transforms.recipe import TransformRecipe, config_targets

__all__ = [
    "BUILD_FAILURES",
    "MAX_SEED",
    "METRIC_EPSILON",
    "NON_NEGATIVE",
    "OPEN_UNIT",
    "POSITIVE",
    "PROBABILITY",
    "UNIT_HALF_OPEN",
    "AttemptRecord",
    "BoundaryError",
    "BundleCalibrator",
    "CalibratorReader",
    "Component",
    "ComponentSpec",
    "Domain",
    "Err",
    "ExperimentPlan",
    "FinalizedStep",
    "FrozenTeacher",
    "LoopView",
    "LossTerm",
    "MetricRegistration",
    "MissingDistributionAttributeError",
    "MissingDistributionError",
    "NNParams",
    "NetRegistration",
    "Objective",
    "ObjectiveContext",
    "ObjectiveResult",
    "ObjectiveStream",
    "Ok",
    "OptimizerSlot",
    "OwnerBuild",
    "Params",
    "PlanError",
    "RecognizingTransform",
    "ResolvedPrecision",
    "Result",
    "RunProvenance",
    "SupervisedLoss",
    "Task",
    "TaskRuntime",
    "TrainableModel",
    "TransformRecipe",
    "UnsafePathError",
    "UpdateEvent",
    "UpdateOwner",
    "always",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "brier_terms",
    "canonical_bytes",
    "cause_line",
    "check_batch_sizes",
    "check_choice",
    "check_count",
    "check_counts",
    "check_enum",
    "check_optional_count",
    "check_optional_real",
    "check_optional_str",
    "check_real",
    "check_run_id",
    "check_seed",
    "check_spec_config",
    "check_spec_id",
    "config_targets",
    "decode_on_axis",
    "distillation_loss",
    "empty_mapping",
    "encode",
    "enum_decoder",
    "enum_spelling",
    "enum_spellings",
    "epoch_ends",
    "finalize_step",
    "frozen_mapping",
    "full_precision_only",
    "imperative_step",
    "inside",
    "load_json",
    "load_yaml",
    "metric_modes",
    "model_fingerprint",
    "net_class_axis",
    "nll_terms",
    "preserved_state",
    "read_provenance",
    "refuse_multi_rank",
    "register_calibrator_reader",
    "register_metric",
    "register_model_factory",
    "register_optimizer_factory",
    "register_transform",
    "registered_calibrator_readers",
    "registered_metrics",
    "registered_model_factories",
    "registered_optimizer_factories",
    "registered_transforms",
    "require_distribution",
    "require_exact",
    "resolve_precision",
    "resolve_task",
    "run_fit_loop",
    "runtime",
    "set_field",
    "sha256_hex",
    "softmax64",
    "supervised_loss",
    "train_mode",
    "unbuildable",
    "unregister_calibrator_reader",
    "unregister_metric",
    "unregister_model_factory",
    "unregister_optimizer_factory",
    "unregister_transform",
]
