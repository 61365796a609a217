"""The engine layer's shared contracts, below the engine itself.

What the fit loop (:mod:`nnx._engine`), the callbacks (:mod:`nnx.callbacks`) and
the objectives (:mod:`nnx.objectives`) all read: the trainable-model protocol,
the component protocol, the monitor tracker, the resolved precision policy and
the batch adapters. Kept apart so that those three folders each import it and
never each other both ways (docs/architecture.md, "Folders in order").

Imports only the layers below the engine.
"""
