"""One search worker process for the multi-process tests.

    python _search_worker.py KIND PATH STUDY TRIALS HANG_AT MARKER

KIND is ``sqlite`` (an RDB storage with a 1 s heartbeat) or ``journal`` (a journal
file). HANG_AT > 0 makes this worker's HANG_AT-th trial write MARKER from inside its fit
(its training data factory) and then sleep until it is killed. Prints the outcomes as
JSON lines.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import optuna
from _search_data import make_plan, train_loader, with_lr
from optuna.distributions import FloatDistribution

from nnx.search import SearchBudget, search


def storage(kind: str, path: str):
    if kind == "sqlite":
        return optuna.storages.RDBStorage(
            f"sqlite:///{path}", heartbeat_interval=1, grace_period=2,
            engine_kwargs={"connect_args": {"timeout": 60}})
    return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(path))


def main() -> None:
    kind, path, study, trials, hang_at, marker = sys.argv[1:7]
    started = [0]

    def apply(plan, params):
        started[0] += 1
        if started[0] != int(hang_at):
            return with_lr(plan, params)

        def hanging_loader():
            Path(marker).write_text("in a trial")
            time.sleep(600)
            return train_loader()
        return with_lr(plan, params).with_data(hanging_loader)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    result = search(make_plan(epochs=1), {"lr": FloatDistribution(0.01, 0.3, log=True)},
                    apply=apply, budget=SearchBudget(trials=int(trials)), study_name=study,
                    storage=storage(kind, path))
    for o in result.outcomes:
        print(json.dumps({"number": o.number, "state": o.state, "run_id": o.run_id,
                          "attempt_id": o.attempt_id}))


if __name__ == "__main__":
    main()
