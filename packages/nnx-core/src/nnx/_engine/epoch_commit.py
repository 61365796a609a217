"""The epoch transaction (spec §4, §4.1; docs/durability.md): what one committed epoch
writes, in order.

history → LAST (weights, training state, position) → the attempt's record of it →
FIRST / Q1–Q3 on their epochs → BEST when the epoch improved → runs/best → the listing
summary. What the callbacks deferred runs after it (the loop's, not this module's). A
LAST that fails rolls the history back to the previous epoch, so history never commits
ahead of LAST.

A commit has two halves. :meth:`EpochCommit.stage` runs in the training thread at the
epoch's end: it settles what the loop decides (the best score, which points are owed)
and copies what will be written (:mod:`nnx._engine.commit_stage`). :meth:`EpochCommit.write`
writes that copy; the :class:`~nnx._engine.commit_writer.CommitWriter` runs it on a
background thread while the next epoch trains (or inline, ``async_commit=False``). A
writer's error is raised in the training thread at the next epoch boundary or at the
end, with the in-memory history cut back to the last durable epoch.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from typing import Any

import torch

from nnx._contracts.components import collect_states
from nnx._engine import training_state
from nnx._engine.commit_stage import StagedCommit, StagedPoint, staged_copy
from nnx._engine.commit_writer import CommitWriter
from nnx._engine.loop_state import LastCommit, LoopState
from nnx._foundation.locking import file_lock
from nnx._foundation.records import NNIterationDataPoint, first_finite
from nnx._persistence.best import promote_best
from nnx._persistence.best_pending import clear_pending, mark_pending
from nnx._persistence.checkpoint import NNCheckpoint
from nnx._persistence.optimizer_shards import StagedShards, remove_tree
from nnx._persistence.point_flush import one_directory_flush
from nnx._persistence.point_position import OWES, SCORE
from nnx._persistence.run import NNRun
from nnx._persistence.summary_writer import summarize_commit

__all__ = ["EpochCommit", "ScoreKeeper", "checkpoint_score", "epoch_committer"]


def checkpoint_score(idp: NNIterationDataPoint) -> float:
    """The score a BEST checkpoint of ``idp`` has (NNCheckpoint.score)."""
    found = first_finite(idp)
    return math.inf if found is None else found[1]


class EpochCommit:
    """Writes a run's committed epochs. ``params`` are the loop's (NNTrainParams or
    NNTrainerParams), ``history`` the run's history (``nnx._persistence.run_history``),
    ``attempt`` the provenance attempt or None, ``phases`` the FIRST / Qk epochs,
    ``background``: whether the commits are written while the next epoch trains."""

    def __init__(self, state: LoopState, *, run: NNRun, net: torch.nn.Module, params: Any,
                 history: Any, attempt: Any, phases: Mapping[str, int],
                 background: bool = False) -> None:
        self.state, self.run, self.net, self.params = state, run, net, params
        self.history, self.attempt, self.phases = history, attempt, dict(phases)
        self.writer = CommitWriter(background=background)
        # LAST as the current commit saved it, with its training state (BEST shares it).
        self._saved_last: tuple[NNCheckpoint, Mapping[str, Any]] | None = None
        # The last epoch whose LAST this fit committed: the history is cut back to it
        # when a commit fails.
        self.durable_epoch = state.start_epoch - 1
        # runs/.best-pending/<id>: dropped before the fit's first BEST and kept to its end
        # (one directory flush per fit, not per BEST); owed while a BEST is not promoted.
        self._marked = self._promotion_owed = False
        # The configurations a checkpoint records, encoded once: they do not change in a fit.
        self._config_states: tuple[Any, Any, Any] | None = None

    # -- what a checkpoint holds --------------------------------------------------------
    def training_state(self, epoch: int, streams: dict[str, Any] | None = None
                       ) -> dict[str, Any]:
        """The sidecar of a checkpoint of ``epoch`` (:func:`training_state.dump`)."""
        return training_state.dump(self.state, self.net, epoch, streams)

    def _checkpoint(self, tag: str, epoch: int, idp: NNIterationDataPoint,
                    state_dict: Mapping[str, torch.Tensor],
                    monitor_value: float | None = None) -> NNCheckpoint:
        run, state = self.run, self.state
        if self._config_states is None:
            self._config_states = (run.model_params.state(),
                                   None if run.net_params is None else run.net_params.state(),
                                   self.params.state())
        model, net, train = self._config_states
        return NNCheckpoint(
            tag=tag, epoch=epoch, run_id=run.id, state_dict=state_dict, model=model,
            net=net, train=train, idp=idp, named_monitor=state.tracker is not None,
            monitor_value=monitor_value, transforms=state.transforms)

    def _point(self, tag: str, epoch: int, idp: NNIterationDataPoint,
               state_dict: Mapping[str, torch.Tensor], monitor_value: float | None = None,
               owes: Mapping[str, Any] | None = None) -> StagedPoint:
        """The point ``tag`` of ``epoch``: its checkpoint and its position. ``owes`` (LAST
        only): the points this commit writes after LAST, recorded in its position so a
        crash before them is recovered (:mod:`nnx._persistence.owed_points`)."""
        checkpoint = self._checkpoint(tag, epoch, idp, state_dict, monitor_value)
        position = training_state.position(self.state, epoch)
        if owes:
            position[OWES] = dict(owes)
        if tag == "best" and not checkpoint.named_monitor:
            score = checkpoint.score  # checked by the score beside runs/best
            position[SCORE] = score if math.isfinite(score) else None
        return StagedPoint(tag, checkpoint, position)

    def save_point(self, point: StagedPoint, saved: Mapping[str, Any], *,
                   as_last: bool, shards: StagedShards | None = None) -> int | None:
        """Write ``point`` with training state ``saved``; returns its generation.
        ``as_last``: in the commit that just saved LAST, whose training state this is, so
        the two points share its sidecar (and optimizer shards) instead of serializing and
        flushing a second copy. ``shards``: a sharded fit's optimizer state, staged by its
        ranks for this point (:mod:`nnx._persistence.optimizer_shards`)."""
        like = self._saved_last if as_last else None
        checkpoint = point.checkpoint
        checkpoint.save(self.run.checkpoints_dir / f"{point.tag}.pt", training_state=saved,
                        position=point.position, like=None if like is None else like[0],
                        shards=shards)
        if point.tag == "last":
            self._saved_last = (checkpoint, saved)
            self._record_compile(saved)
        return checkpoint.generation

    def _record_compile(self, saved: Mapping[str, Any]) -> None:
        """metadata.yaml carries the compile record as of the last commit: LAST's."""
        record = training_state.compile_record(saved)
        if record is not None and self.run.metadata.get("compile") != record:
            self.run.metadata["compile"] = record
            self.run.save_metadata()

    def fingerprint(self) -> Any:
        """What LAST's weights, training state and recipes are, without copying a tensor: each
        tensor by its storage, shape and in-place version counter, every other value as
        it is. Any in-place write, replaced tensor or changed component state differs."""
        state = self.state
        slots = {str(n): (s.optimizer.state_dict(),
                          None if s.schedule is None else s.schedule.state_dict())
                 for n, s in state.slots.items()}
        # The recipes too: a conversion at train end may record one and change no tensor.
        return _fingerprint((self.net.state_dict(), slots, collect_states(state.components),
                             None if state.scaler is None else state.scaler.state_dict(),
                             state.transforms))

    # -- the transaction ----------------------------------------------------------------
    def commit(self, epoch: int, idp: NNIterationDataPoint, *, improved: bool,
               value: float | None) -> None:
        """history → LAST → FIRST/Qk → BEST → runs/best → summary, for the epoch's last
        record: staged now, written by the writer once the previous commit is durable."""
        self.wait()  # back-pressure: one commit in flight; and BEST's existence is settled
        staged = self.stage(epoch, idp, improved=improved, value=value)
        self._surfaced(lambda: self.writer.submit(lambda: self.write(staged)))

    def stage(self, epoch: int, idp: NNIterationDataPoint, *, improved: bool,
              value: float | None) -> StagedCommit:
        """The training thread's half: what the loop decides, and a copy of what is written."""
        run, state = self.run, self.state
        state.commit_started = True  # from here on the run directory is kept (§4.4)
        first_best = not (run.checkpoints_dir / "best.pt").exists()
        if state.tracker is None and (improved or first_best) and value is not None:
            # Before LAST, whose training state carries it: a resume from LAST then
            # judges the next epoch against this one, as the uninterrupted run does.
            state.best_score = min(value, state.best_score)
        owes = self._owes(epoch, improved=improved, first_best=first_best, value=value)
        history = self.history.stage_commit(epoch, idp)
        streams = training_state.capture_streams(state)
        weights = staged_copy(self.net.state_dict())
        staged = StagedCommit(
            epoch=epoch, idp=idp, history=history,
            last=self._point("last", epoch, idp, weights, owes=owes),
            training_state=staged_copy(self.training_state(epoch, streams)),
            optimizer_shards=_shards(self.net),
            mark_pending="best" in owes and state.tracker is None,
            named_monitor=state.tracker is not None, monitor_value=value)
        # Fingerprinted on the run's last epoch only (cheap, but not free): the final
        # LAST refresh compares against it; without one it always rewrites.
        ctx = state.ctx
        final = epoch == state.end_epoch - 1 or ctx.should_stop or ctx.stop_at_update
        state.last_commit = LastCommit(epoch, idp, streams,
                                       self.fingerprint() if final else None)
        for tag, phase_epoch in self.phases.items():
            if phase_epoch == epoch:
                staged.after_last.append(self._point(tag, epoch, idp, weights))
        if state.tracker is not None:  # a named monitor decides BEST; never elected to runs/best
            if improved:
                staged.after_last.append(self._point("best", epoch, idp, weights,
                                                     monitor_value=value))
        elif improved or first_best:
            staged.after_last.append(self._point("best", epoch, idp, weights))
            staged.promote = checkpoint_score(idp)
        return staged

    def write(self, staged: StagedCommit) -> None:
        """The writer's half: ``staged`` written in the transaction's order."""
        with one_directory_flush():  # LAST, the phase points, BEST: one flush of checkpoints/
            run, epoch = self.run, staged.epoch
            if staged.mark_pending:
                mark_pending(run.root, run.id)  # before LAST: a crash anywhere after is settled
                self._marked = self._promotion_owed = True
            staged.history.write()
            try:
                generation = self.save_point(staged.last, staged.training_state, as_last=False,
                                             shards=staged.optimizer_shards)
            except BaseException:
                staged.history.undo()  # LAST failed: history rolls back to the last epoch
                raise
            self.durable_epoch = epoch
            if self.attempt is not None:
                self.attempt.committed("last", epoch, generation)
            for point in staged.after_last:
                self.save_point(point, staged.training_state, as_last=True)
            if staged.promote is not None:
                with file_lock(run.root / ".best.lock", root=run.root):
                    promote_best(run.root, run.id, staged.promote, keep_marker=True)
                self._promotion_owed = False
        summarize_commit(run, epoch, staged.idp, named_monitor=staged.named_monitor,
                         monitor_value=staged.monitor_value)
        self._saved_last = None  # one staged copy in memory: the next commit's

    # -- the training thread's view of the writer ---------------------------------------
    def check(self) -> None:
        """Raise the error of a commit that already failed (an epoch boundary)."""
        self._surfaced(self.writer.check)

    def wait(self) -> None:
        """Return once every commit handed over is durable; raise the error of one that
        failed."""
        self._surfaced(self.writer.wait)

    def settle(self) -> BaseException | None:
        """For a fit unwinding from another error: wait for the commit in flight and
        return its error (the history cut back as for a raised one)."""
        try:
            self.wait()
        except BaseException as exc:
            return exc
        return None

    def _surfaced(self, call: Any) -> None:
        try:
            call()
        except BaseException:
            # What the failed commit did not make durable is not kept in memory either.
            self.history.forget_after(self.durable_epoch)
            raise

    def release_marker(self) -> None:
        """The fit is over: clear its runs/.best-pending marker unless a BEST's promotion
        is still owed (a commit failed between LAST and runs/best: the next promotion or
        election in the root settles it). Best effort: a marker left behind only makes
        the next promotion read this run's BEST once."""
        if not self._marked or self._promotion_owed:
            return
        with contextlib.suppress(OSError), file_lock(self.run.root / ".best.lock",
                                                    root=self.run.root):
            clear_pending(self.run.root, self.run.id)
        self._marked = False

    def _owes(self, epoch: int, *, improved: bool, first_best: bool, value: float | None
              ) -> dict[str, dict[str, Any]]:
        """What :meth:`commit` writes after LAST for ``epoch``, tag by tag."""
        owes: dict[str, dict[str, Any]] = {
            tag: {} for tag, phase_epoch in self.phases.items() if phase_epoch == epoch}
        if self.state.tracker is not None:
            if improved:
                owes["best"] = {"monitor_value": value}
        elif improved or first_best:
            owes["best"] = {}
        return owes

    def refresh_last(self) -> None:
        """After on_train_end: LAST again, same epoch, new generation, so it carries what
        on_train_end changed (§8.4). Its random streams stay the epoch's own, so a resume
        continues exactly as the uninterrupted run would have. Skipped before a first
        commit and after a mid-epoch stop (live weights are never relabelled as a
        committed epoch's, §6.1). Written inline, after the commits in flight. The
        summary follows LAST, which may be a new point. Optimizer shards a sharded fit's
        ranks staged for it and no point took are removed."""
        try:
            self._refresh_last()
        finally:
            shards = _shards(self.net)
            if shards is not None:
                remove_tree(shards.staging)  # gone already when LAST took it

    def _refresh_last(self) -> None:
        self.wait()
        last = self.state.last_commit
        if last is None or self.state.partial_stop:
            return
        if last.fingerprint is not None and self.fingerprint() == last.fingerprint:
            return  # on_train_end changed nothing LAST holds: it already is the final LAST
        point = self._point("last", last.epoch, last.idp, self.net.state_dict())
        generation = self.save_point(point, self.training_state(last.epoch, last.streams),
                                     as_last=False, shards=_shards(self.net))
        if self.attempt is not None:
            self.attempt.committed("last", last.epoch, generation)
        summarize_commit(self.run, last.epoch, last.idp, named_monitor=False,
                         monitor_value=None)


def _shards(net: Any) -> StagedShards | None:
    """The optimizer shards a sharded fit's ranks staged for this commit (its full-state
    view's, nnx._engine.fsdp.FullStateNet); None for any other net."""
    return getattr(net, "optimizer_shards", None)


class ScoreKeeper:
    """The commit of a process that persists nothing (a non-zero DDP rank): it keeps the
    unnamed signal's best score, so every rank judges the next epoch alike."""

    def __init__(self, state: LoopState) -> None:
        self.state = state

    def commit(self, epoch: int, idp: NNIterationDataPoint, *, improved: bool,
               value: float | None) -> None:
        state = self.state
        if improved and state.tracker is None and value is not None:
            state.best_score = min(value, state.best_score)

    def check(self) -> None:
        return None

    def wait(self) -> None:
        return None

    def settle(self) -> BaseException | None:
        return None

    def refresh_last(self) -> None:
        return None

    def release_marker(self) -> None:
        return None


def epoch_committer(state: LoopState, *, persists: bool, run: NNRun, net: torch.nn.Module,
                    params: Any, history: Any, attempt: Any, phases: Mapping[str, int],
                    background: bool = False) -> EpochCommit | ScoreKeeper:
    """The commit of a process that ``persists`` the run, or its score keeper."""
    if not persists:
        return ScoreKeeper(state)
    return EpochCommit(state, run=run, net=net, params=params, history=history,
                       attempt=attempt, phases=phases, background=background)


def _fingerprint(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return ("tensor", value.data_ptr(), tuple(value.shape), str(value.dtype), value._version)
    if isinstance(value, Mapping):
        return tuple((repr(k), _fingerprint(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_fingerprint(v) for v in value)
    return repr(value)
