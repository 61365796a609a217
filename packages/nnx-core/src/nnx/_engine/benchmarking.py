"""Forward benchmarks and profiles (spec §28): measure instead of assuming.

:func:`benchmark_forward` times the first call (compilation included) apart from
``repeats`` warmed calls, which follow ``warmup`` untimed ones; the device is
synchronized before and after each timed call, and on CUDA the peak-memory counters
are reset before the warmed region. :func:`compare_compile` benchmarks an eager and a
compiled deep copy of the same weights, so the module passed in is never touched.
:func:`profile_forward` runs torch.profiler on a finite schedule into an explicit
directory; the profiler is closed on success, error and cancellation, and a benchmark
refuses to time while any profiler runs.

Every forward runs in eval mode under ``torch.no_grad()``; the module's modes are
restored afterwards (§13.2).
"""

from __future__ import annotations

import copy
import os
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from nnx._contracts.trainable import module_of
from nnx._foundation.modes import preserved_state
from nnx._foundation.validation import check_count
from nnx.params.compile import CompileSpec

__all__ = ["BenchmarkResult", "CompileComparison", "ProfileReport", "benchmark_forward",
           "compare_compile", "profile_forward"]


@dataclass(frozen=True)
class BenchmarkResult:
    """One forward benchmark. Times are seconds; ``latencies_s`` are the warmed calls."""

    label: str
    backend: str  # "eager", or the torch.compile backend
    device: str
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    first_call_s: float  # compilation included when compiled
    warmup: int
    repeats: int
    latencies_s: tuple[float, ...]
    mean_s: float
    median_s: float
    stdev_s: float  # 0.0 for a single repeat
    peak_memory_bytes: int | None  # CUDA only: the warmed region's peak


@dataclass(frozen=True)
class CompileComparison:
    """Eager and compiled copies of the same weights, benchmarked alike."""

    eager: BenchmarkResult
    compiled: BenchmarkResult
    same_weights: bool  # the two copies' state dicts were equal before timing
    max_abs_diff: float  # between the two copies' outputs on the example

    @property
    def speedup(self) -> float:
        """Eager median over compiled median (below 1: compiled is slower here)."""
        return self.eager.median_s / self.compiled.median_s


@dataclass(frozen=True)
class ProfileReport:
    """Where a profile went: the trace files written and the profiled steps."""

    output_dir: Path
    traces: tuple[Path, ...]
    steps: int
    table: str  # the operators' key averages, most CPU time first


def _call_args(example_input: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(example_input, torch.Tensor):
        return (example_input,), {}
    if isinstance(example_input, tuple):
        return example_input, {}
    if isinstance(example_input, Mapping):
        return (), dict(example_input)
    raise TypeError(f"example_input must be a tensor, a tuple of inputs or a mapping of "
                    f"keyword inputs; got {type(example_input).__name__}")


def _tensors(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[torch.Tensor]:
    return [x for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)]


def _device(module: nn.Module, tensors: list[torch.Tensor]) -> torch.device:
    for p in module.parameters():
        return p.device
    return tensors[0].device if tensors else torch.device("cpu")


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":  # pragma: no cover - no MPS in CI
        torch.mps.synchronize()


def _refuse_while_profiling(what: str) -> None:
    if torch.autograd.profiler._is_profiler_enabled:
        raise RuntimeError(f"{what} refuses to time while a torch profiler runs: its "
                           "overhead would be measured; time outside the profile")


def _compiled(module: nn.Module, spec: CompileSpec | None) -> Callable[..., Any]:
    if spec is None:
        return module
    if not isinstance(spec, CompileSpec):
        raise TypeError(f"compile= takes a CompileSpec; got {type(spec).__name__}")
    return torch.compile(module, backend=spec.backend, mode=spec.mode,
                         fullgraph=spec.fullgraph, dynamic=spec.dynamic)


def benchmark_forward(model_or_module: Any, example_input: Any, *, warmup: int = 10,
                      repeats: int = 30, compile: CompileSpec | None = None,
                      label: str | None = None) -> BenchmarkResult:
    """Time ``model_or_module``'s forward on ``example_input`` (a tensor, a tuple of
    positional inputs or a mapping of keyword inputs): the first call alone, then
    ``repeats`` calls after ``warmup`` untimed ones. ``compile=CompileSpec(...)``
    times ``torch.compile`` of the module (the module itself is never replaced)."""
    warmup = check_count("benchmark_forward: warmup", warmup, minimum=0)
    repeats = check_count("benchmark_forward: repeats", repeats, minimum=1)
    _refuse_while_profiling("benchmark_forward")
    module = module_of(model_or_module)
    args, kwargs = _call_args(example_input)
    tensors = _tensors(args, kwargs)
    device = _device(module, tensors)
    forward = _compiled(module, compile)

    def timed() -> float:
        _synchronize(device)
        start = time.perf_counter()
        forward(*args, **kwargs)
        _synchronize(device)
        return time.perf_counter() - start

    with preserved_state(module, mode="eval"), torch.no_grad():
        first = timed()
        for _ in range(warmup):
            forward(*args, **kwargs)
        if device.type == "cuda":
            _synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)
        latencies = tuple(timed() for _ in range(repeats))
        peak = torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
    return BenchmarkResult(
        label=label or type(module).__name__,
        backend="eager" if compile is None else compile.backend, device=str(device),
        input_shapes=tuple(tuple(t.shape) for t in tensors),
        input_dtypes=tuple(str(t.dtype).removeprefix("torch.") for t in tensors),
        first_call_s=first, warmup=warmup, repeats=repeats, latencies_s=latencies,
        mean_s=statistics.fmean(latencies), median_s=statistics.median(latencies),
        stdev_s=statistics.stdev(latencies) if repeats > 1 else 0.0,
        peak_memory_bytes=peak)


def _max_abs_diff(a: Any, b: Any) -> float:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return float((a.float() - b.float()).abs().max()) if a.numel() else 0.0
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return max((_max_abs_diff(x, y) for x, y in zip(a, b, strict=True)), default=0.0)
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return max((_max_abs_diff(a[k], b[k]) for k in a), default=0.0)
    return 0.0


def compare_compile(model_or_module: Any, example_input: Any, *,
                    compile: CompileSpec | None = None, warmup: int = 10,
                    repeats: int = 30) -> CompileComparison:
    """Benchmark an eager and a compiled copy of the same weights (``compile`` defaults
    to ``CompileSpec()``, inductor). The module passed in is copied, never run."""
    spec = CompileSpec() if compile is None else compile
    if not isinstance(spec, CompileSpec):
        raise TypeError(f"compile= takes a CompileSpec; got {type(spec).__name__}")
    source = module_of(model_or_module)
    eager, compiled = copy.deepcopy(source), copy.deepcopy(source)
    eager_state, compiled_state = eager.state_dict(), compiled.state_dict()
    same = eager_state.keys() == compiled_state.keys() and all(
        torch.equal(v, compiled_state[k]) for k, v in eager_state.items())
    label = type(source).__name__
    eager_result = benchmark_forward(eager, example_input, warmup=warmup, repeats=repeats,
                                     label=label)
    compiled_result = benchmark_forward(compiled, example_input, warmup=warmup,
                                        repeats=repeats, compile=spec, label=label)
    args, kwargs = _call_args(example_input)
    with (preserved_state(eager, mode="eval"), preserved_state(compiled, mode="eval"),
          torch.no_grad()):
        diff = _max_abs_diff(eager(*args, **kwargs),
                             _compiled(compiled, spec)(*args, **kwargs))
    return CompileComparison(eager_result, compiled_result, same, diff)


def profile_forward(model_or_module: Any, example_input: Any, *,
                    output_dir: str | os.PathLike[str], wait: int = 1, warmup: int = 1,
                    active: int = 3, repeat: int = 1,
                    compile: CompileSpec | None = None) -> ProfileReport:
    """Profile the forward with torch.profiler on the finite schedule ``wait`` /
    ``warmup`` / ``active`` steps, ``repeat`` times, writing the traces (Chrome trace
    JSON, TensorBoard's layout) under ``output_dir``. Nothing is timed here."""
    wait = check_count("profile_forward: wait", wait, minimum=0)
    warmup = check_count("profile_forward: warmup", warmup, minimum=0)
    active = check_count("profile_forward: active", active, minimum=1)
    repeat = check_count("profile_forward: repeat", repeat, minimum=1)
    if output_dir is None:
        raise ValueError("profile_forward needs an explicit output_dir")
    module = module_of(model_or_module)  # every argument checked before output_dir exists
    args, kwargs = _call_args(example_input)
    forward = _compiled(module, compile)
    out = Path(output_dir)
    before = set(out.rglob("*")) if out.exists() else set()
    out.mkdir(parents=True, exist_ok=True)
    device = _device(module, _tensors(args, kwargs))
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    steps = (wait + warmup + active) * repeat
    profiler = torch.profiler.profile(
        activities=activities,
        schedule=torch.profiler.schedule(wait=wait, warmup=warmup, active=active,
                                         repeat=repeat),
        on_trace_ready=torch.profiler.tensorboard_trace_handler(str(out)),
        acc_events=True)  # the table covers every active cycle, not the last one only
    # The with-statement closes the profiler on success, error and KeyboardInterrupt.
    with preserved_state(module, mode="eval"), torch.no_grad(), profiler:
        for _ in range(steps):
            forward(*args, **kwargs)
            profiler.step()
    traces = tuple(sorted(p for p in out.rglob("*") if p.is_file() and p not in before))
    table = profiler.key_averages().table(sort_by="cpu_time_total", row_limit=15)
    return ProfileReport(output_dir=out, traces=traces, steps=steps, table=table)
