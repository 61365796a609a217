"""Layer 4, the engine: the fit loop, its state, resume, steps, the one update window,
the update engine, schedules and prediction. The contracts it shares with the
callbacks and the objectives (the trainable-model protocol, components, monitors,
precision, batch adapters) live one folder lower, in :mod:`nnx._contracts`.

Imports only the layers below it (docs/architecture.md).
"""
