"""The keys of the logical position a resume point records in its manifest (spec §4.1).

Persistence reads the position without opening the sidecar (the run listing, the
summary, owed points, the score beside runs/best, ``nnx runs show``), some of it
without torch; ``nnx._engine.training_state`` writes it through these names. Each key
is spelled here only.
"""

from __future__ import annotations

__all__ = ["COMPLETED_EPOCH", "OWES", "PLANNED_N_EPOCHS", "SCORE", "STOPPED"]

COMPLETED_EPOCH = "completed_epoch"
PLANNED_N_EPOCHS = "planned_n_epochs"
STOPPED = "stopped"  # a deliberate end before the plan's (an early stop)
OWES = "owes"  # the points the commit writes after LAST (nnx._persistence.owed_points)
SCORE = "score"  # BEST's score, checked by the score beside runs/best
