"""Opt-in torch.compile for NNModel.train (spec §28).

:func:`check_compile_scope` refuses, before any run is reserved, what compilation does
not cover. :class:`CompileSession` is one fit's compilation: it builds the compiled
wrapper beside ``model.net`` (never assigned to it, so parameter names, optimizers and
checkpoints stay the canonical module's), routes the model's forward through it for
the fit only, applies the failure policy and keeps the :class:`CompileRecord`.

Failure policy. Every compiled call first snapshots the RNG streams and the net's
buffers. When the call raises, the snapshot is restored and the forward re-run
eagerly: if the eager forward fails too, the error is the forward's own and
propagates unchanged, with the snapshot restored again. Otherwise it was a compile
failure: under ``on_failure="error"`` the snapshot is restored and CompileFailed
raised; under ``"eager"`` the eager output is used and the rest of the fit runs eager.
Only the forward is retried: an error in the first backward after a new graph
compiled is recorded as failed at stage "backward" and propagates.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import nn

from nnx._contracts.precision import resolve_precision
from nnx.enums.nets import Nets
from nnx.params.compile import CompileRecord, CompileRestart, CompileSpec

__all__ = ["CompileFailed", "CompileScopeError", "CompileSession", "check_compile_scope",
           "compiled_fit"]


class CompileScopeError(ValueError):
    """``model.train(compile=...)`` asked for what compilation does not cover (§28);
    raised before any run is reserved."""


class CompileFailed(RuntimeError):
    """A compiled forward failed to compile under ``CompileSpec(on_failure="error")``
    (with ``fullgraph=True`` a graph break is such a failure; so is dynamo's
    recompile limit). ``record`` is the fit's CompileRecord at the failure."""

    def __init__(self, message: str, record: CompileRecord) -> None:
        super().__init__(message)
        self.record = record


def check_compile_scope(spec: Any, model: Any, *, custom_step: bool,
                        callbacks: Sequence[Any], distributed: Any) -> CompileSpec:
    """``spec`` checked, and the fit checked to be one compilation covers."""
    if not isinstance(spec, CompileSpec):
        raise TypeError(f"compile= takes a CompileSpec; got {type(spec).__name__}")

    def refuse(why: str) -> None:
        raise CompileScopeError(f"model.train(compile=...) {why}; train without compile=")

    if not hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        refuse(f"needs torch >= 2.6, which reports a recompile-limit hit; this is "
               f"torch {torch.__version__}")
    if distributed is not None:
        refuse("does not cover distributed=DDP(...)")
    net = getattr(model.params, "net", None)
    # An add-on's Nets member (nnx-lm's TRANSFORMER) declares itself compilable on its
    # NetRegistration: core never imports an add-on to decide.
    if not isinstance(net, Nets) or not net.registration.compilable:
        refuse(f"covers the built-in non-graph nets ({', '.join(_compilable())}); this "
               f"model's net is {getattr(net, 'label', net)!r}")
    if not hasattr(model, "_fit_forward"):
        refuse(f"needs a model that routes its forward ({type(model).__name__} does not)")
    if custom_step:
        refuse("covers the default train step only (no train_step_fn or objective)")
    precision = resolve_precision(model.params, model.device)
    if precision.is_reduced:
        refuse(f"covers full precision (FP32) only; the model trains in "
               f"{precision.policy.name}")
    for callback in callbacks:
        if (type(callback).__name__ == "QATLifecycleCallback"
                or getattr(callback, "checkpoint_transforms", None) is not None):
            refuse(f"does not cover a topology-changing callback ({type(callback).__name__} "
                   "declares checkpoint_transforms)")
    return spec


def _compilable() -> list[str]:
    """The Nets members compile= covers: core's, then each add-on's this process has
    resolved (listing them never imports an add-on)."""
    return [name for name, member in Nets._members.items() if member.registration.compilable]


def _graph_counts() -> tuple[int, int]:
    """Dynamo's process-wide (graph breaks, unique graphs) counters."""
    from torch._dynamo.utils import counters

    return sum(counters["graph_break"].values()), int(counters["stats"]["unique_graphs"])


def _forward_codes(net: nn.Module) -> set[Any]:
    """The code objects of ``net``'s forwards: where dynamo keeps its per-code state."""
    return {type(m).forward.__code__ for m in net.modules()
            if hasattr(type(m).forward, "__code__")}


def _cache_entries(net: nn.Module) -> int:
    """The most dynamo cache entries any forward code object of ``net`` holds: what
    earlier compiled fits of these classes left (the limit counts per code object)."""
    try:
        from torch._dynamo.eval_frame import _debug_get_cache_entry_list
    except ImportError:  # pragma: no cover - the helper moved: count nothing held
        return 0
    return max((len(_debug_get_cache_entry_list(code)) for code in _forward_codes(net)),
               default=0)


def _allow_compiling(net: nn.Module) -> None:
    """Let dynamo compile ``net``'s forwards again. A compile elsewhere in the process
    that hit the recompile limit on one of these code objects (the user's own
    ``torch.compile`` of another instance of the class) left it "run cached graphs
    only": this fit would then run eager without a word, past the limit this fit
    raised and past ``on_failure``. Dynamo sets the mark again at its next hit."""
    try:
        from torch._C._dynamo import eval_frame

        frames: Any = eval_frame
        default = frames._FrameAction.DEFAULT
        strategy = frames._FrameExecStrategy(default, default)
    except (ImportError, AttributeError):  # pragma: no cover - no per-code strategy
        return
    for code in _forward_codes(net):
        frames.set_code_exec_strategy(code, strategy)


@dataclasses.dataclass
class _Snapshot:
    """The RNG streams and buffers a forward starts from, to run it again from them."""

    cpu_rng: torch.Tensor
    cuda_rng: torch.Tensor | None
    device: torch.device
    buffers: list[tuple[torch.Tensor, torch.Tensor]]

    @classmethod
    def take(cls, net: nn.Module, device: torch.device) -> _Snapshot:
        cuda = torch.cuda.get_rng_state(device) if device.type == "cuda" else None
        return cls(torch.get_rng_state(), cuda, device,
                   [(b, b.detach().clone()) for b in net.buffers()])

    def restore(self) -> None:
        torch.set_rng_state(self.cpu_rng)
        if self.cuda_rng is not None:
            torch.cuda.set_rng_state(self.cuda_rng, self.device)
        with torch.no_grad():
            for live, saved in self.buffers:
                live.copy_(saved)


def _describe(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {first[0] if first else ''}".rstrip(": ")


class CompileSession:
    """One fit's compiled forward: callable as the net (``model.forward_raw`` calls it
    during the fit), with the policy and the record."""

    def __init__(self, spec: CompileSpec, net: nn.Module, device: torch.device) -> None:
        self.spec, self.net, self.device = spec, net, device
        self.record = CompileRecord.pending(spec, str(torch.__version__))
        self.eager = False  # set by a restart under on_failure="eager"
        # Where the fit is: the phase, the epoch and (while training) the batch.
        self.phase, self.epoch = "train", 0
        self.batch: int | None = None
        self._compiled: Any = None
        # The first backward after a new graph: entered, and finished (returned).
        self._watch: dict[str, bool] | None = None

    # -- the fit's lifetime ---------------------------------------------------------
    @contextlib.contextmanager
    def active(self, model: Any) -> Iterator[CompileSession]:
        """Build the wrapper, route ``model``'s forward through it and patch dynamo's
        recompile limit for the fit; everything is undone when the fit ends."""
        config = torch._dynamo.config
        # The limit is per code object and process-wide: this fit gets it afresh, on
        # top of the entries earlier fits of the same classes hold.
        limit = int(config.recompile_limit) + _cache_entries(self.net)
        _allow_compiling(self.net)
        self._compiled = torch.compile(self.net, backend=self.spec.backend, mode=self.spec.mode,
                                       fullgraph=self.spec.fullgraph, dynamic=self.spec.dynamic)
        model._fit_forward = self
        try:
            with config.patch(fail_on_recompile_limit_hit=True, recompile_limit=limit):
                yield self
        finally:
            model._fit_forward = None
            self._compiled = self._watch = None  # the wrapper dies with the fit

    def at(self, phase: str, epoch: int, batch: int | None = None) -> None:
        self.phase, self.epoch, self.batch = phase, epoch, batch

    # -- one forward ----------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.eager or self._compiled is None:
            return self.net(*args, **kwargs)
        snapshot = _Snapshot.take(self.net, self.device)
        breaks, graphs = _graph_counts()
        try:
            out = self._compiled(*args, **kwargs)
        except Exception as exc:
            return self._failed(exc, snapshot, args, kwargs)
        new_breaks, new_graphs = _graph_counts()
        if self.record.effect == "pending":  # counted when the first call compiles
            compiled = new_graphs > graphs
            capture = None if not compiled else "full" if new_breaks == breaks else "partial"
            self.record = dataclasses.replace(
                self.record, effect="compiled", capture=capture,
                graph_breaks=new_breaks - breaks if compiled else None)
        if new_graphs > graphs and isinstance(out, torch.Tensor) and out.requires_grad:
            watch = self._watch = {"entered": False, "finished": False}
            out.register_hook(  # type: ignore[no-untyped-call]
                lambda grad: _entered(watch))
        return out

    def _failed(self, exc: Exception, snapshot: _Snapshot, args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> Any:
        snapshot.restore()
        try:
            out = self.net(*args, **kwargs)  # the forward's own error, if it has one
        except Exception:
            snapshot.restore()
            raise
        error = _describe(exc)
        if self.spec.on_failure == "error":
            snapshot.restore()  # as the failed call found them
            self.record = dataclasses.replace(self.record, effect="failed", stage="forward",
                                              capture=None, graph_breaks=None, error=error)
            raise CompileFailed(
                f"the compiled forward failed to compile ({self.phase}, epoch {self.epoch}"
                f"{'' if self.batch is None else f', batch {self.batch}'}): {error}; "
                "CompileSpec(on_failure='eager') finishes such a run eager", self.record
            ) from exc
        self.eager = True
        self.record = dataclasses.replace(
            self.record, effect="eager", capture=None, graph_breaks=None,
            restart=CompileRestart(self.phase, self.epoch, self.batch, error))
        return out

    # -- around one training step ---------------------------------------------------
    def step_done(self) -> None:
        self._watch = None

    def step_failed(self, exc: BaseException) -> None:
        """A step raised: after a new graph compiled and once its backward began, the
        failure is recorded as the backward's (it propagates; nothing is retried)."""
        watch, self._watch = self._watch, None
        if (watch is not None and watch["entered"] and not watch["finished"]
                and self.record.effect != "failed"):
            self.record = dataclasses.replace(self.record, effect="failed", stage="backward",
                                              capture=None, graph_breaks=None, restart=None,
                                              error=_describe(exc))


def _entered(watch: dict[str, bool]) -> None:
    """The backward reached the compiled output; when that backward pass returns, the
    engine runs the queued callback, so a later error (clipping, the optimizer step) is
    not the backward's."""
    watch["entered"] = True
    torch.autograd.Variable._execution_engine.queue_callback(
        lambda: watch.__setitem__("finished", True))


def compiled_fit(spec: CompileSpec | None, model: Any) -> CompileSession | None:
    """The fit's session (None without ``compile=``)."""
    return None if spec is None else CompileSession(spec, model.net, model.device)
