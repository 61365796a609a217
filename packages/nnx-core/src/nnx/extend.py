r"""The public extension API: every name an add-on needs from nnx-core (docs/extending.md).

A thin face: each name is defined elsewhere in nnx-core and re-exported here
unchanged, so an add-on (and the reference plugin under
``tests-integration/example-plugin``) imports ``nnx.extend`` instead of a
``_``-prefixed module. Each name is imported on first use, so an add-on pays only
for what it reads: the run-file readers and the NumPy terms load no torch. Names:

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
  :func:`capture_rng_state` / :func:`restore_rng_state` (every global RNG stream:
  Python, NumPy, torch and CUDA), so an add-on's helper that draws random numbers
  (nnx-viz's ``lr_finder``) puts them back as resume and model construction do;
* running a bare module as core does: :func:`module_of` (the module a helper taking
  an NNModel or a module works on), :func:`default_batch_adapter` (the adapter
  ``NNModel`` gives a module: its ``batch_adapter()``, its ``unpack_batch``, else
  positional inputs) and :func:`export_onnx` (``NNModel.to_onnx``'s exporter for any
  module, its messages naming the ``owner`` call), so nnx-viz's ``summary(batch=...)``
  splits a batch and its ``netron_export`` writes ONNX exactly as core does;
* nets: :class:`NetRegistration` (an ``nnx.nets`` entry point's value);
  :func:`net_class_axis` (a net's declared ``class_axis``: which output axis holds the
  classes, e.g. ``-1`` for ``(batch, seq, vocab)`` logits) and :func:`decode_on_axis`
  (a decoder that reads axis 1 applied on that axis), so an add-on's predictor decodes
  as ``predict()`` does;
* registries: ``register_*`` / ``registered_*`` / ``unregister_*`` for model
  factories, optimizer factories, metrics (with :class:`MetricRegistration`;
  ``input=``:data:`TASK_METRIC_INPUT` for a metric only its task's evaluation step
  computes, over the stream it buffers) and transforms, and
  :class:`MissingDistributionError` (with its attribute-access twin
  :class:`MissingDistributionAttributeError`);
* protocols: :class:`Component` (with :class:`ComponentSpec`), :class:`Task` (with its
  defaults: :func:`resolve_task` and :class:`TaskRuntime`, the task object beside the
  per-batch machinery core builds for it), :class:`TaskBatchOps` (that machinery as an
  add-on may use it, :func:`task_batch_ops`), :class:`TrainableModel` (what the engine reads of a
  model: type steps against it) and :class:`IdentifiedInputs` (batch inputs that name
  each output row's sample id, as graph seed rows do: predict_proba reports them) with
  :func:`batch_row_ids` (the ids a batch, or a list of batches, gives its rows: what the
  built-in tasks' ``sample_ids`` answers, for a Task-protocol object to answer the same);
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
  :func:`materialize_low_rank` and :class:`LowRankLinear` (core's ``nnx.low_rank``
  SVD replacement, so nnx-surgery's ``low_rank_factorize`` is that op, never a second
  SVD);
* run bundles (spec §22): :class:`BundleCalibrator` (what a calibrator shows a bundle:
  ``to_json()``, ``labels``, ``num_classes``, ``model_id``), :func:`model_fingerprint`
  (the weights digest a bundle recomputes from its payload) and
  ``register_calibrator_reader`` / ``registered_calibrator_readers`` /
  ``unregister_calibrator_reader`` with :data:`CalibratorReader` (how a record of a
  format, ``nnx.calibration/1``, becomes an object again on reconstruction);
* reading runs without unpickling (a read-only report over many runs, ``nnx.comparison``):
  :func:`read_run_document` / :func:`run_document_exists` and :class:`RunDocument` (a
  run's run.yaml and metadata.yaml through named readers: the loop block, seeds, parent
  link, monitor, resume record and ``identity_config()``, the configuration without its
  runtime fields; :data:`RUN_DOCUMENT_KEYS`, the keys no add-on spells),
  :func:`load_yaml` (the bounded YAML reader),
  :func:`read_provenance` with :class:`RunProvenance` and :class:`AttemptRecord` (a run's
  verified provenance.json and attempt.json, spec §4.4) and :func:`epoch_ends` (each
  epoch's last record from idps.csv or the journal, cut at an epoch the caller knows, no
  checkpoint opened), :func:`iter_history` (every committed record of a run, chunk by
  chunk, as ``nnx.history`` reads it: nnx-viz's history curves);
  :func:`summarize_run` (a run's ``nnx runs list`` row: status, BEST and what it scores,
  created, data id; called as ``summarize_run(root, run_id)``) and :func:`format_score`
  (how the listing prints a score), so nnx-viz's runs report shows runs as the list does;
* crossing to another add-on: :func:`require_distribution` (the one install hint);
* errors as values (spec §27): :class:`Ok`, :class:`Err`, :data:`Result` and
  :class:`BoundaryError`, so an add-on's boundary wrapper (nnx.decisions'
  ``decide_result``) returns core's own Result types;
* driving the epoch loop with a run of one's own (nnx-viz's LR sweep):
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


# Lazy (PEP 562), like ``nnx/__init__.py``: each name imports its home module on first
# use. An eager face would load torch and most of core for any add-on that imports one
# name from here; a reader of run files (nnx.comparison, nnx.calibration) must not.
import typing as _typing

_EXPORTS: dict[str, str] = {
    "BundleCalibrator": "nnx._contracts.calibrators",
    "CalibratorReader": "nnx._contracts.calibrators",
    "model_fingerprint": "nnx._contracts.calibrators",
    "register_calibrator_reader": "nnx._contracts.calibrators",
    "registered_calibrator_readers": "nnx._contracts.calibrators",
    "unregister_calibrator_reader": "nnx._contracts.calibrators",
    "Component": "nnx._contracts.components",
    "ComponentSpec": "nnx._contracts.components",
    "default_batch_adapter": "nnx._contracts.batch_adapters",
    "ResolvedPrecision": "nnx._contracts.precision",
    "resolve_precision": "nnx._contracts.precision",
    "TrainableModel": "nnx._contracts.trainable",
    "module_of": "nnx._contracts.trainable",
    "run_fit_loop": "nnx._engine.fit_run",
    "export_onnx": "nnx._engine.onnx_export",
    "register_optimizer_factory": "nnx._engine.optimizer_factories",
    "registered_optimizer_factories": "nnx._engine.optimizer_factories",
    "unregister_optimizer_factory": "nnx._engine.optimizer_factories",
    "decode_on_axis": "nnx._engine.prediction",
    "net_class_axis": "nnx._engine.prediction",
    "FinalizedStep": "nnx._engine.step_helpers",
    "SupervisedLoss": "nnx._engine.step_helpers",
    "finalize_step": "nnx._engine.step_helpers",
    "full_precision_only": "nnx._engine.step_helpers",
    "supervised_loss": "nnx._engine.step_helpers",
    "train_mode": "nnx._engine.step_helpers",
    "OptimizerSlot": "nnx._engine.update_engine",
    "LoopView": "nnx._engine.update_owner",
    "OwnerBuild": "nnx._engine.update_owner",
    "UpdateOwner": "nnx._engine.update_owner",
    "atomic_write": "nnx._foundation.atomic",
    "atomic_write_bytes": "nnx._foundation.atomic",
    "atomic_write_text": "nnx._foundation.atomic",
    "load_json": "nnx._foundation.bounded",
    "load_yaml": "nnx._foundation.bounded",
    "Params": "nnx._foundation.config_base",
    "always": "nnx._foundation.config_base",
    "empty_mapping": "nnx._foundation.config_base",
    "encode": "nnx._foundation.config_base",
    "enum_decoder": "nnx._foundation.config_base",
    "frozen_mapping": "nnx._foundation.config_base",
    "require_exact": "nnx._foundation.config_base",
    "runtime": "nnx._foundation.config_base",
    "set_field": "nnx._foundation.config_base",
    "canonical_bytes": "nnx._foundation.hashing",
    "sha256_hex": "nnx._foundation.hashing",
    "preserved_state": "nnx._foundation.modes",
    "MissingDistributionAttributeError": "nnx._foundation.plugins",
    "MissingDistributionError": "nnx._foundation.plugins",
    "require_distribution": "nnx._foundation.plugins",
    "BoundaryError": "nnx._foundation.result",
    "Err": "nnx._foundation.result",
    "Ok": "nnx._foundation.result",
    "Result": "nnx._foundation.result",
    "UnsafePathError": "nnx._foundation.safe_paths",
    "inside": "nnx._foundation.safe_paths",
    "capture_rng_state": "nnx._foundation.seeding",
    "restore_rng_state": "nnx._foundation.seeding",
    "MAX_SEED": "nnx._foundation.validation",
    "NON_NEGATIVE": "nnx._foundation.validation",
    "OPEN_UNIT": "nnx._foundation.validation",
    "POSITIVE": "nnx._foundation.validation",
    "PROBABILITY": "nnx._foundation.validation",
    "UNIT_HALF_OPEN": "nnx._foundation.validation",
    "Domain": "nnx._foundation.validation",
    "check_batch_sizes": "nnx._foundation.validation",
    "check_choice": "nnx._foundation.validation",
    "check_count": "nnx._foundation.validation",
    "check_counts": "nnx._foundation.validation",
    "check_enum": "nnx._foundation.validation",
    "check_optional_count": "nnx._foundation.validation",
    "check_optional_real": "nnx._foundation.validation",
    "check_optional_str": "nnx._foundation.validation",
    "check_real": "nnx._foundation.validation",
    "check_run_id": "nnx._foundation.validation",
    "check_seed": "nnx._foundation.validation",
    "check_spec_config": "nnx._foundation.validation",
    "check_spec_id": "nnx._foundation.validation",
    "enum_spelling": "nnx._foundation.validation",
    "enum_spellings": "nnx._foundation.validation",
    "epoch_ends": "nnx._journal.reader",
    "iter_history": "nnx.history.reader",
    "BUILD_FAILURES": "nnx._persistence.read_errors",
    "RUN_DOCUMENT_KEYS": "nnx._persistence.run_document",
    "RunDocument": "nnx._persistence.run_document",
    "summarize_run": "nnx._persistence.run_listing",
    "format_score": "nnx._persistence.run_rows",
    "read_run_document": "nnx._persistence.run_document",
    "run_document_exists": "nnx._persistence.run_document",
    "cause_line": "nnx._persistence.read_errors",
    "unbuildable": "nnx._persistence.read_errors",
    "PlanError": "nnx._surface.plan_types",
    "ExperimentPlan": "nnx._surface.plans",
    "refuse_multi_rank": "nnx._surface.plans",
    "NetRegistration": "nnx.enums.nets",
    "MetricRegistration": "nnx.metrics.registry",
    "TASK_METRIC_INPUT": "nnx.metrics.registry",
    "metric_modes": "nnx.metrics.registry",
    "register_metric": "nnx.metrics.registry",
    "registered_metrics": "nnx.metrics.registry",
    "unregister_metric": "nnx.metrics.registry",
    "METRIC_EPSILON": "nnx.metrics.terms",
    "brier_terms": "nnx.metrics.terms",
    "nll_terms": "nnx.metrics.terms",
    "softmax64": "nnx.metrics.terms",
    "UnreloadableNetError": "nnx.models",
    "register_model_factory": "nnx.models",
    "reload_blockers": "nnx.models",
    "registered_model_factories": "nnx.models",
    "unregister_model_factory": "nnx.models",
    "LossTerm": "nnx.objectives._core",
    "Objective": "nnx.objectives._core",
    "ObjectiveContext": "nnx.objectives._core",
    "ObjectiveResult": "nnx.objectives._core",
    "UpdateEvent": "nnx.objectives._core",
    "distillation_loss": "nnx.objectives.kd",
    "imperative_step": "nnx.objectives.ownership",
    "ObjectiveStream": "nnx.objectives.stream",
    "FrozenTeacher": "nnx.objectives.teacher",
    "NNParams": "nnx.params.net",
    "AttemptRecord": "nnx.provenance",
    "RunProvenance": "nnx.provenance",
    "read_provenance": "nnx.provenance",
    "TaskBatchOps": "nnx.tasks.batch_ops",
    "task_batch_ops": "nnx.tasks.batch_ops",
    "Task": "nnx.tasks.protocol",
    "TaskRuntime": "nnx.tasks.runtime",
    "resolve_task": "nnx.tasks.runtime",
    "IdentifiedInputs": "nnx.tasks.row_ids",
    "batch_row_ids": "nnx.tasks.row_ids",
    "register_transform": "nnx.transforms",
    "registered_transforms": "nnx.transforms",
    "unregister_transform": "nnx.transforms",
    "RecognizingTransform": "nnx.transforms.live",
    "LowRankLinear": "nnx.transforms.low_rank",
    "materialize_low_rank": "nnx.transforms.low_rank",
    "TransformRecipe": "nnx.transforms.recipe",
    "config_targets": "nnx.transforms.recipe",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> _typing.Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'nnx.extend' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if _typing.TYPE_CHECKING:
    # Explicit re-exports for type checkers (runtime resolution is lazy, above); a test
    # ties this block to ``_EXPORTS`` name for name and module for module.
    from nnx._contracts.batch_adapters import default_batch_adapter as default_batch_adapter
    from nnx._contracts.calibrators import BundleCalibrator as BundleCalibrator
    from nnx._contracts.calibrators import CalibratorReader as CalibratorReader
    from nnx._contracts.calibrators import model_fingerprint as model_fingerprint
    from nnx._contracts.calibrators import register_calibrator_reader as register_calibrator_reader
    from nnx._contracts.calibrators import (
        registered_calibrator_readers as registered_calibrator_readers,
    )
    from nnx._contracts.calibrators import (
        unregister_calibrator_reader as unregister_calibrator_reader,
    )
    from nnx._contracts.components import Component as Component
    from nnx._contracts.components import ComponentSpec as ComponentSpec
    from nnx._contracts.precision import ResolvedPrecision as ResolvedPrecision
    from nnx._contracts.precision import resolve_precision as resolve_precision
    from nnx._contracts.trainable import TrainableModel as TrainableModel
    from nnx._contracts.trainable import module_of as module_of
    from nnx._engine.fit_run import run_fit_loop as run_fit_loop
    from nnx._engine.onnx_export import export_onnx as export_onnx
    from nnx._engine.optimizer_factories import (
        register_optimizer_factory as register_optimizer_factory,
    )
    from nnx._engine.optimizer_factories import (
        registered_optimizer_factories as registered_optimizer_factories,
    )
    from nnx._engine.optimizer_factories import (
        unregister_optimizer_factory as unregister_optimizer_factory,
    )
    from nnx._engine.prediction import decode_on_axis as decode_on_axis
    from nnx._engine.prediction import net_class_axis as net_class_axis
    from nnx._engine.step_helpers import FinalizedStep as FinalizedStep
    from nnx._engine.step_helpers import SupervisedLoss as SupervisedLoss
    from nnx._engine.step_helpers import finalize_step as finalize_step
    from nnx._engine.step_helpers import full_precision_only as full_precision_only
    from nnx._engine.step_helpers import supervised_loss as supervised_loss
    from nnx._engine.step_helpers import train_mode as train_mode
    from nnx._engine.update_engine import OptimizerSlot as OptimizerSlot
    from nnx._engine.update_owner import LoopView as LoopView
    from nnx._engine.update_owner import OwnerBuild as OwnerBuild
    from nnx._engine.update_owner import UpdateOwner as UpdateOwner
    from nnx._foundation.atomic import atomic_write as atomic_write
    from nnx._foundation.atomic import atomic_write_bytes as atomic_write_bytes
    from nnx._foundation.atomic import atomic_write_text as atomic_write_text
    from nnx._foundation.bounded import load_json as load_json
    from nnx._foundation.bounded import load_yaml as load_yaml
    from nnx._foundation.config_base import Params as Params
    from nnx._foundation.config_base import always as always
    from nnx._foundation.config_base import empty_mapping as empty_mapping
    from nnx._foundation.config_base import encode as encode
    from nnx._foundation.config_base import enum_decoder as enum_decoder
    from nnx._foundation.config_base import frozen_mapping as frozen_mapping
    from nnx._foundation.config_base import require_exact as require_exact
    from nnx._foundation.config_base import runtime as runtime
    from nnx._foundation.config_base import set_field as set_field
    from nnx._foundation.hashing import canonical_bytes as canonical_bytes
    from nnx._foundation.hashing import sha256_hex as sha256_hex
    from nnx._foundation.modes import preserved_state as preserved_state
    from nnx._foundation.plugins import (
        MissingDistributionAttributeError as MissingDistributionAttributeError,
    )
    from nnx._foundation.plugins import MissingDistributionError as MissingDistributionError
    from nnx._foundation.plugins import require_distribution as require_distribution
    from nnx._foundation.result import BoundaryError as BoundaryError
    from nnx._foundation.result import Err as Err
    from nnx._foundation.result import Ok as Ok
    from nnx._foundation.result import Result as Result
    from nnx._foundation.safe_paths import UnsafePathError as UnsafePathError
    from nnx._foundation.safe_paths import inside as inside
    from nnx._foundation.seeding import capture_rng_state as capture_rng_state
    from nnx._foundation.seeding import restore_rng_state as restore_rng_state
    from nnx._foundation.validation import MAX_SEED as MAX_SEED
    from nnx._foundation.validation import NON_NEGATIVE as NON_NEGATIVE
    from nnx._foundation.validation import OPEN_UNIT as OPEN_UNIT
    from nnx._foundation.validation import POSITIVE as POSITIVE
    from nnx._foundation.validation import PROBABILITY as PROBABILITY
    from nnx._foundation.validation import UNIT_HALF_OPEN as UNIT_HALF_OPEN
    from nnx._foundation.validation import Domain as Domain
    from nnx._foundation.validation import check_batch_sizes as check_batch_sizes
    from nnx._foundation.validation import check_choice as check_choice
    from nnx._foundation.validation import check_count as check_count
    from nnx._foundation.validation import check_counts as check_counts
    from nnx._foundation.validation import check_enum as check_enum
    from nnx._foundation.validation import check_optional_count as check_optional_count
    from nnx._foundation.validation import check_optional_real as check_optional_real
    from nnx._foundation.validation import check_optional_str as check_optional_str
    from nnx._foundation.validation import check_real as check_real
    from nnx._foundation.validation import check_run_id as check_run_id
    from nnx._foundation.validation import check_seed as check_seed
    from nnx._foundation.validation import check_spec_config as check_spec_config
    from nnx._foundation.validation import check_spec_id as check_spec_id
    from nnx._foundation.validation import enum_spelling as enum_spelling
    from nnx._foundation.validation import enum_spellings as enum_spellings
    from nnx._journal.reader import epoch_ends as epoch_ends
    from nnx._persistence.read_errors import BUILD_FAILURES as BUILD_FAILURES
    from nnx._persistence.read_errors import cause_line as cause_line
    from nnx._persistence.read_errors import unbuildable as unbuildable
    from nnx._persistence.run_document import RUN_DOCUMENT_KEYS as RUN_DOCUMENT_KEYS
    from nnx._persistence.run_document import RunDocument as RunDocument
    from nnx._persistence.run_document import read_run_document as read_run_document
    from nnx._persistence.run_document import run_document_exists as run_document_exists
    from nnx._persistence.run_listing import summarize_run as summarize_run
    from nnx._persistence.run_rows import format_score as format_score
    from nnx._surface.plan_types import PlanError as PlanError
    from nnx._surface.plans import ExperimentPlan as ExperimentPlan
    from nnx._surface.plans import refuse_multi_rank as refuse_multi_rank
    from nnx.enums.nets import NetRegistration as NetRegistration
    from nnx.history.reader import iter_history as iter_history
    from nnx.metrics.registry import TASK_METRIC_INPUT as TASK_METRIC_INPUT
    from nnx.metrics.registry import MetricRegistration as MetricRegistration
    from nnx.metrics.registry import metric_modes as metric_modes
    from nnx.metrics.registry import register_metric as register_metric
    from nnx.metrics.registry import registered_metrics as registered_metrics
    from nnx.metrics.registry import unregister_metric as unregister_metric
    from nnx.metrics.terms import METRIC_EPSILON as METRIC_EPSILON
    from nnx.metrics.terms import brier_terms as brier_terms
    from nnx.metrics.terms import nll_terms as nll_terms
    from nnx.metrics.terms import softmax64 as softmax64
    from nnx.models import UnreloadableNetError as UnreloadableNetError
    from nnx.models import register_model_factory as register_model_factory
    from nnx.models import registered_model_factories as registered_model_factories
    from nnx.models import reload_blockers as reload_blockers
    from nnx.models import unregister_model_factory as unregister_model_factory
    from nnx.objectives._core import LossTerm as LossTerm
    from nnx.objectives._core import Objective as Objective
    from nnx.objectives._core import ObjectiveContext as ObjectiveContext
    from nnx.objectives._core import ObjectiveResult as ObjectiveResult
    from nnx.objectives._core import UpdateEvent as UpdateEvent
    from nnx.objectives.kd import distillation_loss as distillation_loss
    from nnx.objectives.ownership import imperative_step as imperative_step
    from nnx.objectives.stream import ObjectiveStream as ObjectiveStream
    from nnx.objectives.teacher import FrozenTeacher as FrozenTeacher
    from nnx.params.net import NNParams as NNParams
    from nnx.provenance import AttemptRecord as AttemptRecord
    from nnx.provenance import RunProvenance as RunProvenance
    from nnx.provenance import read_provenance as read_provenance
    from nnx.tasks.batch_ops import TaskBatchOps as TaskBatchOps
    from nnx.tasks.batch_ops import task_batch_ops as task_batch_ops
    from nnx.tasks.protocol import Task as Task
    from nnx.tasks.row_ids import IdentifiedInputs as IdentifiedInputs
    from nnx.tasks.row_ids import batch_row_ids as batch_row_ids
    from nnx.tasks.runtime import TaskRuntime as TaskRuntime
    from nnx.tasks.runtime import resolve_task as resolve_task
    from nnx.transforms import register_transform as register_transform
    from nnx.transforms import registered_transforms as registered_transforms
    from nnx.transforms import unregister_transform as unregister_transform
    from nnx.transforms.live import RecognizingTransform as RecognizingTransform
    from nnx.transforms.low_rank import LowRankLinear as LowRankLinear
    from nnx.transforms.low_rank import materialize_low_rank as materialize_low_rank
    from nnx.transforms.recipe import TransformRecipe as TransformRecipe
    from nnx.transforms.recipe import config_targets as config_targets
