"""Forward benchmarks and profiles (spec §28): measure instead of assuming.

:func:`benchmark_forward` times the first call apart from the warmed ones,
:func:`compare_compile` benchmarks eager and compiled copies of identical weights and
:func:`profile_forward` writes a torch.profiler trace on a finite schedule
(docs/compile.md, examples/benchmark_compile.py).
"""

from nnx._engine.benchmarking import (
    BenchmarkResult,
    CompileComparison,
    ProfileReport,
    benchmark_forward,
    compare_compile,
    profile_forward,
)

__all__ = ["BenchmarkResult", "CompileComparison", "ProfileReport", "benchmark_forward",
           "compare_compile", "profile_forward"]
