"""A fit's lifetime around its epochs (spec §4, §4.4, §6, §8.4; docs/durability.md).

:func:`run_fit_loop` builds the :class:`~nnx._engine.fit_loop.FitLoop` (every refusal
before anything is reserved), reserves the run, opens its history and provenance
attempt, runs ``on_train_begin``, applies a resume, runs the epochs, runs
``on_train_end``, writes the final LAST and closes the attempt. A run that fails
before its first commit releases its reservation; the process session is left last.
``train()`` returns once every commit is durable: a commit still being written when the
epochs end (or fail) is waited for before ``on_train_end``.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from nnx._engine.epoch_commit import epoch_committer
from nnx._engine.fit_loop import EvalFn, FitLoop
from nnx._engine.fit_setup import reserve_run
from nnx._engine.loop_support import end_callbacks, parent_attempt, run_deferred
from nnx._engine.resume import apply_resume
from nnx._engine.update_owner import UpdateOwner
from nnx._foundation.seeding import set_seed
from nnx._persistence.reservation import RunExistsError, RunLeaseError
from nnx._persistence.run import NNRun, display_path
from nnx.transforms.apply import train_end_transforms

if TYPE_CHECKING:
    from nnx._contracts.trainable import TrainableModel

__all__ = ["RunExistsError", "RunLeaseError", "run_fit_loop"]


def run_fit_loop(owner: UpdateOwner, model: TrainableModel, params: Any, *,
                 objective: Any = None, eval_step_fn: EvalFn | None = None,
                 callbacks: Sequence[Any] = (), salt: str | None = None,
                 verbose: bool | None = None, root: str = "runs",
                 components: Sequence[Any] = (), history: Any = None, provenance: Any = None,
                 distributed: Any = None, compile: Any = None) -> NNRun:
    """Train ``model`` for the run ``owner`` describes and return the committed run: the
    one entry to the epoch loop (NNModel.train and Trainer.train call it with their own
    owners; an add-on passes its own instead of subclassing the loop). Every refusal of
    the owner's ``build`` and of the loop happens before the run directory is reserved."""
    loop = FitLoop(owner, model, params, objective=objective, eval_fn=eval_step_fn,
                   callbacks=callbacks, salt=salt, verbose=verbose, root=root,
                   components=components, history=history, provenance=provenance,
                   distributed=distributed, compile=compile)
    completed, session = False, loop.session
    try:
        with contextlib.ExitStack() as locks:
            # Whether this call reserved (created) the run directory: only the main process.
            created = bool(session.on_main(lambda: reserve_run(loop.run, loop.params, locks),
                                           f"reserve run {loop.run.id}"))
            try:
                with (contextlib.nullcontext() if loop.compiled is None
                      else loop.compiled.active(model)):
                    run = _fit(loop)
            except BaseException:
                # A run that failed before its first commit leaves nothing behind (§4.4):
                # only a directory this call created, and only while its lease is held.
                if created and not loop.state.commit_started:
                    shutil.rmtree(loop.run.path, ignore_errors=True)
                raise
            completed = True
            return run
    finally:
        # Let go of the DDP wrapper before its group is destroyed: the loop, the engine
        # and the owner's step context each hold it.
        loop.train_net = None
        if loop.engine is not None:
            loop.engine.train_net = None
        end_fit = getattr(owner, "end_fit", None)  # optional: only a caching owner has it
        if callable(end_fit):
            end_fit()
        session.close(completed=completed)


def _fit(loop: FitLoop) -> NNRun:
    if loop.params.seed is not None:
        set_seed(loop.params.seed)
    ctx, run, session = loop.ctx, loop.run, loop.session
    loop.hist = session.history(run, loop.journal)
    ctx.idps = loop.hist.view
    optimizers = [slot.optimizer for slot in loop.state.slots.values()]
    loop.train_net = session.wrap(loop.model.net, optimizers)
    if loop.engine is not None:  # its contexts carry the wrapper (ctx.train_net)
        loop.engine.train_net = loop.train_net
    if loop.provenance is not None:
        from nnx.provenance.attempt import begin_attempt  # on first use (issue 38)

        loop.attempt = session.on_main(lambda: begin_attempt(
            run.path, loop.provenance, parent=parent_attempt(run.root, loop.resume)),
            f"begin an attempt of run {run.id}")
    # The model as checkpoints see it: commits read it, a resume loads into it, and
    # callbacks read its weights (ctx.model_state_dict: whole under FSDP too).
    whole = session.persisted(loop.model.net)
    ctx.committed_state = whole.state_dict
    loop.committer = epoch_committer(
        loop.state, persists=session.is_main, run=run, net=whole,
        params=loop.params, history=loop.hist, attempt=loop.attempt, phases=loop.phases,
        background=loop.params.async_commit)
    try:
        for cb in loop.callbacks:
            cb.on_train_begin(ctx)
        begin = getattr(loop.owner, "begin", None)  # optional: the owner may refuse what
        if callable(begin):  # the reset hooks registered (only the Trainer does)
            begin(loop)
        # Agreed once: whether a mid-epoch stop must be agreed in every batch.
        loop.agree_stops = session.any(bool(ctx.update_listeners))
        if loop.resume is not None:
            apply_resume(loop.resume, loop.state, loop.model.net, whole)
            run.resume_status = loop.resume.status
            run.metadata["resume"] = loop.resume.status.state()
            session.on_main(run.save_config, f"record the resume of run {run.id}")
        loop.epochs()
        loop.committer.wait()  # every epoch durable before on_train_end (or its error)
    except BaseException as exc:
        # The commit in flight finishes first: the run resumes from the last durable point.
        pending = loop.committer.settle()
        if pending is not None and pending is not exc:
            exc.add_note(f"the epoch commit in flight failed too: {pending!r}")
        # on_train_end still runs so loggers close their files; ctx.error says why.
        ctx.error = exc
        _finish_attempt(loop, "cancelled" if isinstance(exc, KeyboardInterrupt)
                        else "failed", exc)
        raise
    finally:
        loop.progress.close()
        loop.committer.release_marker()
        end_callbacks(loop.callbacks, ctx, loop.hist)
    try:
        # A conversion at train end (QATLifecycleCallback) records its recipe in the final
        # LAST, so NNModel.from_checkpoint rebuilds the converted net (spec §16).
        loop.state.transforms = train_end_transforms(loop.callbacks, loop.model,
                                                     loop.state.transforms)
        # Every process waits for the final LAST, so none goes on to read LAST (a
        # resume in the same process group) while it is being replaced.
        session.gather(loop.model.net, optimizers, run.checkpoints_dir)
        session.on_main(loop.committer.refresh_last, f"write the final LAST of run {run.id}")
        run_deferred(ctx)  # what on_train_end deferred sees the final LAST
    except BaseException as exc:
        _finish_attempt(loop, "failed", exc)
        raise
    _finish_attempt(loop, "completed", None)
    if loop.verbose is not False:  # verbose=False prints nothing (and other processes)
        print(f"Run saved to {display_path(run.path)}")
    return run


def _finish_attempt(loop: FitLoop, status: str, exc: BaseException | None) -> None:
    """Close the provenance attempt (none without provenance=) with the compile record
    as of now."""
    if loop.attempt is None:
        return
    compile_state = None if loop.compiled is None else loop.compiled.record.state()
    if exc is None:
        loop.attempt.finish(status, compile=compile_state)
    else:
        loop.attempt.finish(status, exc, suppress_errors=True, compile=compile_state)
