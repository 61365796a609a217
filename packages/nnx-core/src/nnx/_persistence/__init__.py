"""Layer 3, persistence: runs, checkpoints, resume points, the runs/best pointer,
where a run's records go, whether its history holds what LAST commits, and how
a run reads in a terminal.

Imports only the foundation, the configuration layer, :mod:`nnx.provenance` and
:mod:`nnx._journal` (how a history is stored, below this package);
:mod:`nnx.history` reads runs from above it (docs/architecture.md).
"""
