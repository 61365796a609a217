"""The NaN guard's epoch tally (spec §6.1, §6.5): skipped windows, one warning, one refusal.

The default step's NaN guard and an objective's ``nonfinite="skip"`` policy drop
an update window with a non-finite loss (or gradient norm) instead of stepping.
Each epoch counts those windows here and reports them once at its end: one
RuntimeWarning naming the cause, the first batch and the count, however many
windows were dropped. An epoch that committed no optimizer update because the
guard dropped its windows trained nothing; committing it would advertise
unchanged weights and non-finite records as an epoch (and, on a first epoch,
as BEST). So it raises :class:`NonFiniteRunError` before its commit instead: a
run whose first epoch fails this way releases its directory, a later epoch
leaves the run at its last committed epoch with a failed attempt.
"""

from __future__ import annotations

import warnings

__all__ = ["NonFiniteRunError", "NonFiniteSkips"]


class NonFiniteRunError(FloatingPointError):
    """An epoch committed no update: the NaN guard skipped every update window it ran
    (a FloatingPointError, like the objective's ``nonfinite="fail"`` refusal)."""


class NonFiniteSkips:
    """One epoch's update windows and the ones dropped as non-finite."""

    def __init__(self) -> None:
        self.windows = 0
        self.skipped = 0
        self.first: tuple[int, str] | None = None  # (batch index, cause) of the first drop

    def closed(self, batch_idx: int, cause: str | None = None) -> None:
        """An update window closed at ``batch_idx``; ``cause`` names why it was dropped
        as non-finite ("training loss", "loss term 'x'", "gradient norm"), None if not."""
        self.windows += 1
        if cause is not None:
            self.skipped += 1
            if self.first is None:
                self.first = (batch_idx, cause)

    def end_epoch(self, epoch: int, updates: int) -> None:
        """Warn once about the epoch's dropped windows, or refuse an epoch that dropped
        windows and committed no update (called before the epoch's commit)."""
        if self.first is None:
            return
        batch, cause = self.first
        counted = f"{self.skipped} of {self.windows} update window(s)"
        if updates == 0:
            raise NonFiniteRunError(
                f"epoch {epoch} committed no optimizer update: the NaN guard skipped "
                f"{counted} for a non-finite {cause} (first at batch {batch}), so the run "
                "trains nothing; the epoch is not committed. Check the data for NaN / inf, "
                "lower the learning rate or clip gradients (grad_clip_norm)")
        warnings.warn(f"epoch {epoch}: non-finite {cause} at batch {batch}: the update window "
                      f"is skipped ({counted} this epoch)", RuntimeWarning, stacklevel=3)
