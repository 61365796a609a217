"""The metric registry: ``(id, version)`` → factory, input kind and natural direction.

Registrations live in the process-wide ``nnx.metrics`` versioned registry, so
an add-on can also announce one through an entry point named ``id@vN`` whose
object is a :class:`MetricRegistration`. Resolving a spec never imports a
module by name or evaluates a string.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from nnx._foundation.plugins import VersionedRegistry, versioned_registry
from nnx._foundation.validation import check_choice
from nnx.params.metric import MetricSpec

__all__ = [
    "METRIC_INPUTS",
    "METRIC_MODES",
    "RESERVED_NAMES",
    "TASK_METRIC_INPUT",
    "MetricAccumulator",
    "MetricRegistration",
    "MetricSource",
    "MissingMetricError",
    "check_metric_inputs",
    "metric_modes",
    "register_metric",
    "registered_metrics",
    "resolve_metric",
    "row_metrics",
    "unregister_metric",
]

#: The input of a metric no per-row accumulator can serve: the model's task computes it in
#: its own evaluation step, over the stream it buffers (nnx-ranking's per-query metrics
#: see every candidate of a query at once). It is servable only where the run's task lists
#: it in ``metric_specs()``; the default paths, fed row by row, refuse it.
TASK_METRIC_INPUT = "task"
#: What a metric receives as its prediction.
METRIC_INPUTS = ("labels", "probabilities", "continuous", TASK_METRIC_INPUT)
#: A metric's natural direction: higher ("max") or lower ("min") is better.
METRIC_MODES = ("max", "min")
#: Names a declared metric may not take: the record's own control values.
RESERVED_NAMES = ("loss", "error")

_INPUT_NEEDS = {
    "labels": "a classification model that decodes labels (categorical: CrossEntropyLoss / "
              "NLLLoss, or multilabel: BCEWithLogitsLoss)",
    "probabilities": "a categorical (CrossEntropyLoss / NLLLoss) or multilabel "
                     "(BCEWithLogitsLoss) model",
    "continuous": "a regression loss (MSELoss, L1Loss, SmoothL1Loss, HuberLoss) or a "
                  "regression task",
}


class MetricAccumulator(Protocol):
    """What a metric factory returns: fed every batch's valid samples, read once."""

    def update(self, target: Any, prediction: Any) -> None: ...

    def result(self) -> float: ...


class MetricSource(Protocol):
    """What a model (its task adapter) can provide to metrics."""

    @property
    def metric_inputs(self) -> frozenset[str]: ...

    @property
    def metric_kind(self) -> str | None: ...

    @property
    def num_outputs(self) -> int | None: ...

    @property
    def description(self) -> str: ...


MetricFactory = Callable[[Mapping[str, Any]], MetricAccumulator]
ConfigCheck = Callable[[Mapping[str, Any]], None]
TaskCheck = Callable[[Mapping[str, Any], MetricSource], None]


class MissingMetricError(ValueError):
    """A MetricSpec names an (id, version) nothing registered in this process."""


@dataclass(frozen=True, slots=True)
class MetricRegistration:
    """A registered metric: its factory, the input it receives and its natural direction.

    ``check_config(config)`` refuses a bad config with a ``ValueError``;
    ``check_task(config, source)`` refuses a config the model cannot serve.
    """

    factory: MetricFactory
    input: str
    mode: str
    check_config: ConfigCheck | None = None
    check_task: TaskCheck | None = None

    def __post_init__(self) -> None:
        if not callable(self.factory):
            raise ValueError(f"a metric factory must be callable; got {self.factory!r}")
        check_choice("register_metric input", self.input, METRIC_INPUTS)
        check_choice("register_metric mode", self.mode, METRIC_MODES)
        for name in ("check_config", "check_task"):
            hook = getattr(self, name)
            if hook is not None and not callable(hook):
                raise ValueError(f"register_metric {name} must be callable or None; got {hook!r}")


def _registry() -> VersionedRegistry:
    return versioned_registry("nnx.metrics")


def register_metric(
    id: str,
    version: int,
    factory: MetricFactory,
    *,
    input: str,
    mode: str,
    check_config: ConfigCheck | None = None,
    check_task: TaskCheck | None = None,
) -> MetricRegistration:
    """Register ``factory`` as metric ``id`` at ``version`` for this process.

    ``factory(config)`` returns an accumulator with ``update(target, prediction)``
    and ``result()``; ``input`` is ``"labels"``, ``"probabilities"`` or
    ``"continuous"``; ``mode`` is the natural direction (``"max"`` / ``"min"``).
    A later registration of the same (id, version) replaces the earlier one.
    """
    registration = MetricRegistration(
        factory=factory, input=input, mode=mode, check_config=check_config,
        check_task=check_task,
    )
    _registry().register(id, version, registration)
    return registration


def registered_metrics() -> list[tuple[str, int]]:
    """Every metric ``(id, version)`` registered in this process (built-ins included)."""
    return _registry().registered()


def unregister_metric(id: str, version: int) -> None:
    """Forget metric ``(id, version)`` for this process; KeyError naming it if unknown.

    ``register_builtin_metrics()`` puts a removed built-in back.
    """
    _registry().unregister(id, version, what="metric")


def resolve_metric(spec: MetricSpec) -> MetricRegistration:
    """The registration ``spec`` names, with its config checked.

    Raises :class:`MissingMetricError` naming the registered versions when the
    (id, version) is unknown; no metric code runs in that case.
    """
    if not isinstance(spec, MetricSpec):
        raise ValueError(f"a declared metric must be a MetricSpec; got {spec!r}")
    found: MetricRegistration = _registry().require(
        spec.id, spec.version, what="metric", error=MissingMetricError,
        register=f"nnx.metrics.register_metric({spec.id!r}, {spec.version}, ...) before "
                 "training",
        accepts=lambda entry: isinstance(entry, MetricRegistration),
        expected="a MetricRegistration")
    if found.check_config is not None:
        found.check_config(spec.config)
    return found


def check_metric_inputs(
    specs: Iterable[MetricSpec], source: MetricSource, *, task: Any = None
) -> tuple[tuple[MetricSpec, MetricRegistration], ...]:
    """Check declared metrics against what the model provides, before any batch is read.

    Refuses an unregistered spec, a duplicate or reserved name, and an input the
    model cannot provide (``ValueError``); returns each spec with its registration.
    A :data:`TASK_METRIC_INPUT` metric is served by ``task`` (the run's task object)
    alone, and only when its ``metric_specs()`` lists that very spec; a caller that feeds
    metrics row by row passes no task, so it refuses them.
    """
    resolved: list[tuple[MetricSpec, MetricRegistration]] = []
    seen: set[str] = set()
    for spec in specs:
        registration = resolve_metric(spec)
        label = spec.label
        if label in RESERVED_NAMES:
            raise ValueError(
                f"metric {spec.id}@v{spec.version} cannot be reported as {label!r}: that name "
                f"is the record's own {label}; give the MetricSpec another name="
            )
        if label in seen:
            raise ValueError(
                f"two declared metrics are reported as {label!r}; give one of them a "
                f"distinct name="
            )
        seen.add(label)
        if registration.input == TASK_METRIC_INPUT:
            _check_task_serves(spec, task)
        elif registration.input not in source.metric_inputs:
            raise ValueError(
                f"metric {label!r} ({spec.id}@v{spec.version}) needs {registration.input} "
                f"inputs, which need {_INPUT_NEEDS[registration.input]}; this model is "
                f"{source.description}"
            )
        if registration.check_task is not None:
            registration.check_task(spec.config, source)
        resolved.append((spec, registration))
    return tuple(resolved)


def _check_task_serves(spec: MetricSpec, task: Any) -> None:
    """Refuse a task-computed metric the run's task does not list as its own."""
    listed = task.metric_specs() if task is not None else ()
    if spec not in listed:
        owner = ("no task computes it here: the default paths score rows one batch at a "
                 "time" if task is None else
                 f"{type(task).__name__}.metric_specs() does not list {spec!r}")
        raise ValueError(
            f"metric {spec.label!r} ({spec.id}@v{spec.version}) is computed by a task's own "
            f"evaluation step; {owner}. Declare it as the task's metric_specs() give it, "
            f"on a model whose task computes it")


def row_metrics(specs: Iterable[MetricSpec]) -> tuple[MetricSpec, ...]:
    """The declared metrics a row-by-row accumulator computes: all but the
    :data:`TASK_METRIC_INPUT` ones, which only the task's evaluation step reports."""
    return tuple(s for s in specs if resolve_metric(s).input != TASK_METRIC_INPUT)


def metric_modes(specs: Iterable[MetricSpec]) -> dict[str, str]:
    """Each declared metric's natural direction by reported name (for monitors)."""
    return {spec.label: resolve_metric(spec).mode for spec in specs}
