"""Crash safety (spec §4.2, §14.3): SIGKILL a training process anywhere, and what is
left on disk is always a readable run whose resume points verify and whose history
stops at LAST; resuming it with the same plan ends bit for bit where an uninterrupted
run ends.

Each trial is one trainer process training the same plan into its own root. Importing
torch and building the first optimizer (which imports torch._dynamo) cost several CPU
seconds per process, so two trainer servers (the TRAINER script, started with
``subprocess.Popen([sys.executable, script])``) pay that once and fork one trainer per
job; the trainer starts training at once, and the test SIGKILLs it by pid. Trials run
two at a time, one per server.

Resume trials copy a killed trial's root and SIGKILL a stateful, planned resume of its
run (while it verifies and plans, mid-epoch, or inside a widened commit): the source
must be byte for byte as it was, and the child run must pass the same checks. Every
check also asserts that each compatibility copy ``<tag>.pt.opt.pt`` holds its live
point's sidecar (or, while a publish is under way, the staged point's), and saves each
point once more in a copy of the run: that save must leave no orphan sidecar or temp.

The test reads the trainer's markers (``GO`` before ``train()``, ``E`` at each epoch's
start, ``U`` after each optimizer update, ``C+`` / ``C-`` around each epoch's commit,
``W <file>`` after each resume-point file lands) and kills it a seeded-random delay
after a seeded-random marker. Commit-targeted trials set a widening delay: the trainer
then sleeps around every resume-point file write and after every run-file write (test
code patched into the trainer, never the library), so kills land inside the publish
windows reliably.
"""

from __future__ import annotations

import os
import random
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from _support.crash_harness import (
    N_EPOCHS,
    RESUME_KILLS,
    TRAINER,
    Server,
    Trial,
    _check_trial,
    _finish,
    _kill_trial,
    _lend,
    _plan_resume_trials,
    _plan_trials,
    _servers,
)

from nnx import NNCheckpoint, NNRun


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork") or not hasattr(signal, "SIGKILL"),
                    reason="needs POSIX fork and SIGKILL")
def test_sigkill_anywhere_leaves_a_readable_run_that_resumes_bit_for_bit(tmp_path: Path) -> None:
    started = time.monotonic()
    script = tmp_path / "crash_trainer.py"
    script.write_text(TRAINER, encoding="utf-8")
    rng = random.Random(20240611)
    trials = _plan_trials(rng)
    for trial in trials:
        trial.root = tmp_path / f"trial{trial.index:03d}"
    reference_out = tmp_path / "reference.pt"

    with _servers(script, 2) as servers, ThreadPoolExecutor(max_workers=2) as workers:
        reference = workers.submit(_lend, servers, _finish, "train", str(tmp_path / "reference"),
                                   str(reference_out), "0")
        kills = [workers.submit(_lend, servers, _kill_trial, t) for t in trials]
        reference.result()
        for kill in kills:
            kill.result()
        expected = torch.load(reference_out, weights_only=True)

        for trial in trials:
            _check_trial(trial)
        killed = [t for t in trials if t.killed]
        inside = [t for t in killed if t.in_commit]
        assert len({t.last_epoch for t in killed}) >= 4  # spread across the epochs

        # Kill resumes of what the kills left (each in a copy of the killed trial's root).
        resumable = [t for t in killed
                     if t.last_epoch is not None and t.last_epoch < N_EPOCHS - 1]
        resume_trials = _plan_resume_trials(rng, resumable, len(trials), RESUME_KILLS)
        for trial in resume_trials:
            trial.root = tmp_path / f"trial{trial.index:03d}"
        for kill in [workers.submit(_lend, servers, _kill_trial, t) for t in resume_trials]:
            kill.result()
        for trial in resume_trials:
            _check_trial(trial)
        killed_resumes = [t for t in resume_trials if t.killed]
        all_killed = killed + killed_resumes
        assert len(all_killed) >= 100, [(t.index, t.kind, t.lines[-3:]) for t in
                                         trials + resume_trials if not t.killed]
        assert len(inside) >= 5 and len(killed_resumes) >= 10
        assert sum(t.in_commit for t in killed_resumes) >= 3

        # Resume what the kills left (commit kills first) and finish the plan; a killed
        # resume is resumed from its own run when it committed an epoch, else retried.
        staged_last = [t for t in resumable if "last staged manifest verified" in t.evidence]
        assert staged_last, "no kill left a LAST whose manifest was still staged"
        resumable.sort(key=lambda t: (t not in staged_last, not t.torn_commit,
                                      not t.in_commit, t.index))
        chosen = resumable[:6]
        assert len(chosen) >= 5, [(t.index, t.last_epoch) for t in killed]
        chosen_resumes = sorted(killed_resumes, key=lambda t: (t.last_epoch is None,
                                                               not t.in_commit, t.index))[:6]

        def resume(server: Server, trial: Trial) -> dict[str, torch.Tensor]:
            out = trial.root.with_name(trial.root.name + ".resumed.pt")
            source, overwrite, source_epoch = trial.run_id, "0", trial.last_epoch
            if trial.source is not None and trial.last_epoch is None:
                # Killed before the resume committed: retry it over the child it left.
                assert trial.source.run_id is not None
                source, overwrite, source_epoch = trial.source.run_id, "1", (
                    trial.source.last_epoch)
            elif trial.last_epoch == N_EPOCHS - 1:  # the killed resume had finished its plan
                return dict(NNCheckpoint.load(trial.run_id or "", "last",
                                              root=trial.root).state_dict)
            assert source is not None
            lines = _finish(server, "resume", str(trial.root), source, str(out), "0",
                            overwrite)
            child = next(words[1] for words in lines if words[:1] == ["DONE"])
            status = NNRun.load(child, root=trial.root).resume_status
            assert (status.mode, status.source_run, status.source_epoch) == (
                "stateful", source, source_epoch)
            weights: dict[str, torch.Tensor] = torch.load(out, weights_only=True)
            return weights

        finishing = chosen + chosen_resumes
        resumed = [workers.submit(_lend, servers, resume, t) for t in finishing]
        for trial, future in zip(finishing, resumed, strict=True):
            weights = future.result()
            assert weights.keys() == expected.keys()
            for key, value in expected.items():
                assert torch.equal(weights[key], value), (trial.index, trial.last_epoch, key)

    elapsed = time.monotonic() - started
    torn = [t for t in inside if t.torn_commit]
    print(f"crash safety: {len(all_killed)} kills ({len(killed)} training: {len(inside)} "
          f"inside a commit, {len(torn)} of them visibly mid-transaction on disk; "
          f"{len(killed_resumes)} resuming), {len(finishing)} resumed bit for bit (trials "
          f"{[t.index for t in finishing]}, {len(staged_last)} from a LAST whose manifest "
          f"was staged), {elapsed:.1f}s")
    for trial in sorted(trials + resume_trials, key=lambda t: t.index):
        source = "" if trial.source is None else f"of trial {trial.source.index} "
        print(f"  trial {trial.index:3d} {trial.kind:<13} {source}after "
              f"{' '.join(trial.target):<9}#{trial.occurrence} "
              f"+{trial.delay * 1000:5.1f}ms  killed={trial.killed!s:<5} "
              f"LAST={trial.last_epoch}  in_commit={trial.in_commit!s:<5} "
              f"torn={trial.torn_commit!s:<5} {'; '.join(trial.evidence)}")
