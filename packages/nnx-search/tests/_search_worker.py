"""One search worker process for the multi-process tests.

    python _search_worker.py KIND WHERE STUDY TRIALS HANG_AT MARKER [GRACE]

KIND is ``sqlite`` (WHERE: the database file) or ``postgresql`` (WHERE: the database
URL), both an RDB storage with a 1 s heartbeat, or ``journal`` (WHERE: the journal
file). HANG_AT > 0 makes this worker's HANG_AT-th trial write MARKER from inside its
fit, once its run exists (at the end of its first epoch), and then sleep until it is
killed. GRACE (default 2 s) is how long a trial's heartbeat may be late before another
worker fails it as stale: the tests that kill a worker keep it short, so its orphan is
found quickly; the tests where every worker lives give it a wide margin, so a worker
starved of CPU on a loaded machine is never taken for dead. Prints the outcomes as JSON
lines.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import optuna
from _search_data import make_plan, with_lr
from optuna.distributions import FloatDistribution

from nnx import Callback
from nnx.search import SearchBudget, search


def storage(kind: str, where: str, grace: int = 2):
    if kind == "sqlite":
        return optuna.storages.RDBStorage(
            f"sqlite:///{where}", heartbeat_interval=1, grace_period=grace,
            engine_kwargs={"connect_args": {"timeout": 60}})
    if kind == "postgresql":
        return optuna.storages.RDBStorage(where, heartbeat_interval=1, grace_period=grace)
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(where))


class _Hang(Callback):
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def on_epoch_end(self, ctx) -> None:
        Path(self.marker).write_text("in a trial")
        time.sleep(600)


def main() -> None:
    kind, path, study, trials, hang_at, marker = sys.argv[1:7]
    grace = int(sys.argv[7]) if len(sys.argv) > 7 else 2
    started = [0]

    def apply(plan, params):
        started[0] += 1
        if started[0] != int(hang_at):
            return with_lr(plan, params)
        return with_lr(plan, params).with_callback_factories(lambda: _Hang(marker))

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    result = search(make_plan(epochs=1), {"lr": FloatDistribution(0.01, 0.3, log=True)},
                    apply=apply, budget=SearchBudget(trials=int(trials)), study_name=study,
                    storage=storage(kind, path, grace))
    for o in result.outcomes:
        print(json.dumps({"number": o.number, "state": o.state, "run_id": o.run_id,
                          "attempt_id": o.attempt_id}))


if __name__ == "__main__":
    main()
