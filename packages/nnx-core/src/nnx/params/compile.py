"""CompileSpec and CompileRecord (spec §28): what ``model.train(compile=...)`` asks for
and what took effect.

Both are plain data. The request never enters the run id (compiling changes how a
step runs, not what the run is); the record is kept beside the run instead: on
``NNRun.compile``, in metadata.yaml, in each stateful checkpoint's training state and
in attempt.json. They live with the configuration so that the run and checkpoint
readers below the engine can rebuild a record without importing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from nnx._foundation.validation import check_choice, check_count, check_optional_str

__all__ = ["CAPTURES", "EFFECTS", "MODES", "POLICIES", "CompileRecord", "CompileRestart",
           "CompileSpec"]

#: torch.compile's named modes (None: torch's default).
MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
#: What a forward that fails to compile does: raise CompileFailed, or finish eager.
POLICIES = ("error", "eager")
#: pending: no compiled forward ran yet; compiled; eager: restarted eager; failed.
EFFECTS = ("pending", "compiled", "eager", "failed")
#: full: one graph, no break; partial: graph breaks; None: served from dynamo's cache.
CAPTURES = ("full", "partial")
_STAGES = ("forward", "backward")


def _optional_bool(field: str, value: Any) -> bool | None:
    if value is not None and not isinstance(value, bool):
        raise ValueError(f"{field} must be True, False or None; got {value!r}")
    return value


@dataclass(frozen=True)
class CompileSpec:
    """``model.train(params, compile=CompileSpec(...))``: run the built-in step's forward
    (and the fit's validation) through ``torch.compile``.

    ``backend`` / ``mode`` / ``fullgraph`` / ``dynamic`` are torch.compile's.
    ``on_failure="error"`` raises :class:`~nnx.compilation.CompileFailed` when a
    compiled forward fails to compile (with ``fullgraph=True`` a graph break is such a
    failure); ``"eager"`` re-runs that forward eagerly and finishes the run eager.
    """

    backend: str = "inductor"
    mode: str | None = None
    fullgraph: bool = False
    dynamic: bool | None = None
    on_failure: str = "error"

    def __post_init__(self) -> None:
        check_optional_str("CompileSpec.backend", self.backend)
        if self.backend is None:
            raise ValueError("CompileSpec.backend must name a torch.compile backend; got None")
        if self.mode is not None:
            check_choice("CompileSpec.mode", self.mode, MODES)
        if not isinstance(self.fullgraph, bool):
            raise ValueError(f"CompileSpec.fullgraph must be True or False; "
                             f"got {self.fullgraph!r}")
        _optional_bool("CompileSpec.dynamic", self.dynamic)
        check_choice("CompileSpec.on_failure", self.on_failure, POLICIES)

    def state(self) -> dict[str, Any]:
        return {"backend": self.backend, "mode": self.mode, "fullgraph": self.fullgraph,
                "dynamic": self.dynamic, "on_failure": self.on_failure}


@dataclass(frozen=True)
class CompileRestart:
    """Where a run under ``on_failure="eager"`` went eager: the phase ("train",
    "validate" or "callback"), the epoch, the batch (None outside training) and the
    compile error."""

    phase: str
    epoch: int
    batch: int | None
    error: str

    def state(self) -> dict[str, Any]:
        return {"phase": self.phase, "epoch": self.epoch, "batch": self.batch,
                "error": self.error}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> CompileRestart:
        batch = state.get("batch")
        return cls(phase=str(state["phase"]), epoch=int(state["epoch"]),
                   batch=None if batch is None else int(batch), error=str(state["error"]))


@dataclass(frozen=True)
class CompileRecord:
    """The request (backend, mode, fullgraph, dynamic, policy, torch version) and what
    took effect: ``effect`` is "pending", "compiled" (``capture`` "full" / "partial" /
    None when the graph came from dynamo's cache, and ``graph_breaks``), "eager" (with
    ``restart``) or "failed" (``stage`` "forward" or "backward", and ``error``)."""

    backend: str
    mode: str | None
    fullgraph: bool
    dynamic: bool | None
    on_failure: str
    torch_version: str
    effect: str = "pending"
    capture: str | None = None
    graph_breaks: int | None = None
    restart: CompileRestart | None = None
    stage: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        check_choice("CompileRecord.effect", self.effect, EFFECTS)
        check_choice("CompileRecord.on_failure", self.on_failure, POLICIES)
        if self.capture is not None:
            check_choice("CompileRecord.capture", self.capture, CAPTURES)
        if self.graph_breaks is not None:
            check_count("CompileRecord.graph_breaks", self.graph_breaks, minimum=0)
        if self.stage is not None:
            check_choice("CompileRecord.stage", self.stage, _STAGES)
        if (self.restart is not None) != (self.effect == "eager"):
            raise ValueError("CompileRecord: a restart is recorded exactly when the effect "
                             "is 'eager'")

    @classmethod
    def pending(cls, spec: CompileSpec, torch_version: str) -> CompileRecord:
        return cls(torch_version=torch_version, **spec.state())

    @property
    def request(self) -> dict[str, Any]:
        """What was asked for: the CompileSpec's fields and the torch version."""
        return {"backend": self.backend, "mode": self.mode, "fullgraph": self.fullgraph,
                "dynamic": self.dynamic, "on_failure": self.on_failure,
                "torch_version": self.torch_version}

    def state(self) -> dict[str, Any]:
        """Plain data (YAML, JSON and a weights-only checkpoint hold it as is)."""
        return {**self.request, "effect": self.effect, "capture": self.capture,
                "graph_breaks": self.graph_breaks,
                "restart": None if self.restart is None else self.restart.state(),
                "stage": self.stage, "error": self.error}

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> CompileRecord:
        if not isinstance(state, Mapping):
            raise ValueError(f"a compile record must be a mapping; got {type(state).__name__}")
        restart = state.get("restart")
        return cls(backend=str(state["backend"]), mode=state.get("mode"),
                   fullgraph=bool(state["fullgraph"]), dynamic=state.get("dynamic"),
                   on_failure=str(state["on_failure"]),
                   torch_version=str(state["torch_version"]),
                   effect=str(state.get("effect", "pending")), capture=state.get("capture"),
                   graph_breaks=state.get("graph_breaks"),
                   restart=None if restart is None else CompileRestart.from_state(restart),
                   stage=state.get("stage"), error=state.get("error"))
