"""Layer 3, persistence (its lowest folder): how a run's history is stored.

The history journal (``runs/<id>/history/``: format, store, writer, window,
its configuration and its one error) and the legacy idps.csv layout, with the
readers that need only those files. Imports only the foundation, so every
persistence module (runs, checkpoints, the history's completeness check) can
build on it; run-level reading that needs LAST, the runs/best pointer or a
run's lineage is :mod:`nnx.history`, above :mod:`nnx._persistence`, and that
public package re-exports the names users import from here.
"""
