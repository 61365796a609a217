"""Opt-in compilation (spec §28): ``model.train(params, compile=CompileSpec(...))``.

The built-in step's forward and the fit's validation run through ``torch.compile``;
``model.net`` stays the eager module (docs/compile.md). No speed-up is promised:
measure with :mod:`nnx.benchmarking`.
"""

from nnx._engine.compilation import CompileFailed, CompileScopeError
from nnx.params.compile import CompileRecord, CompileRestart, CompileSpec

__all__ = ["CompileFailed", "CompileRecord", "CompileRestart", "CompileScopeError",
           "CompileSpec"]
