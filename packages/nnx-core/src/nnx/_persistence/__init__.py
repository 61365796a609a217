"""Layer 3, persistence: runs, checkpoints, resume points, the runs/best pointer,
the eager history table and how a run reads in a terminal.

Imports only the foundation and the configuration layer (docs/architecture.md).
"""
