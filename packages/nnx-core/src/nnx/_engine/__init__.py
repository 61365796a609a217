"""Layer 4, the engine: the fit loop, its state, resume, steps, the one update window,
the update engine, schedules, monitors, components, precision and prediction.

Imports only the layers below it (docs/architecture.md).
"""
