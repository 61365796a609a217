"""How trials run, score, fail, stop and count (spec §29)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import ClassVar

import optuna
import pytest
import torch
from _search_data import make_plan, train_loader, with_lr
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState

from nnx import Callback, MonitorSpec
from nnx.search import SearchBudget, SearchConfigurationError, search

SPACE = {"lr": FloatDistribution(0.01, 0.3, log=True)}


def _study(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'study.db'}"


def test_a_trial_scores_the_runs_own_best_decision_min_delta_included(tmp_path,
                                                                      monkeypatch) -> None:
    # min_delta=10: only the first epoch ever improves, so BEST is epoch 0 even where a
    # later epoch's validation loss is lower; the trial's value is epoch 0's.
    monkeypatch.chdir(tmp_path)
    monitor = MonitorSpec(metric="loss", min_delta=10.0)
    plan = make_plan(epochs=3, monitor=monitor)
    result = search(plan, SPACE, apply=with_lr, budget=SearchBudget(trials=1))
    (outcome,) = result.outcomes
    records = __import__("nnx").NNRun.load(outcome.run_id).epoch_records()
    values = [r.val_edp.loss for r in records]
    assert outcome.state == "completed" and outcome.best_epoch == 0
    assert outcome.value == pytest.approx(values[0]) and len(values) == 3
    assert result.best is outcome and outcome.epochs == 3
    assert outcome.checkpoint is not None and Path(outcome.checkpoint).is_file()


def _explodes_on(word: str):
    def apply(plan, params):
        if params["mode"] != word:
            return plan

        def broken_loader():
            raise RuntimeError("the loader broke")
        return plan.with_data(broken_loader)
    return apply


def test_a_failing_fit_is_recorded_and_the_search_goes_on_counting_it(tmp_path,
                                                                       monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    space = {"mode": CategoricalDistribution(("ok", "boom"))}
    result = search(make_plan(epochs=1), space, apply=_explodes_on("boom"),
                    budget=SearchBudget(trials=4), storage=_study(tmp_path), study_name="f",
                    sampler=optuna.samplers.RandomSampler(seed=3))
    assert result.stop_reason == "budget" and result.counted == 4 and len(result.outcomes) == 4
    failed = [o for o in result.outcomes if o.params["mode"] == "boom"]
    assert failed and all(o.state == "failed" and o.reason == "error" for o in failed)
    assert all("RuntimeError: the loader broke" in o.error for o in failed)
    assert all(o.state == "completed" for o in result.outcomes if o.params["mode"] == "ok")
    stored = optuna.load_study(study_name="f", storage=_study(tmp_path)).trials
    assert [t.state == TrialState.FAIL for t in stored] == [o.state == "failed"
                                                           for o in result.outcomes]
    assert stored[result.outcomes.index(failed[0])].user_attrs["nnx.search.error"] \
        == failed[0].error


@pytest.mark.parametrize("apply, match", [
    (lambda plan, params: "not a plan", "apply must return an ExperimentPlan"),
    (lambda plan, params: 1 / 0, "apply raised ZeroDivisionError"),
    (lambda plan, params: plan.with_metrics(monitor=MonitorSpec(metric="error")),
     "the search scores by"),
    (lambda plan, params: plan.with_callbacks(Callback()), "borrowed callbacks"),
    (lambda plan, params: plan.with_data(train_loader()), "data.train: .*zero-argument factory"),
    (lambda plan, params: plan.with_data(train_loader, val=train_loader()),
     "data.val: .*zero-argument factory"),
    # a data factory whose result the fit refuses (PlanError, before any run exists)
    (lambda plan, params: plan.with_data(lambda: torch.zeros(4, 4)), "data.train"),
])
def test_a_configuration_error_fails_its_trial_and_stops_the_search(tmp_path, monkeypatch,
                                                                     apply, match) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SearchConfigurationError, match=match) as caught:
        search(make_plan(epochs=1), SPACE, apply=apply, budget=SearchBudget(trials=5),
               storage=_study(tmp_path), study_name="c")
    assert caught.value.outcome.reason == "configuration"
    assert caught.value.result.stop_reason == "configuration"
    assert caught.value.result.counted == 1 and len(caught.value.result.outcomes) == 1
    (trial,) = optuna.load_study(study_name="c", storage=_study(tmp_path)).trials
    assert trial.state == TrialState.FAIL  # counted against the stored study's budget
    assert not (tmp_path / "runs").exists()


def test_an_exhausted_grid_ends_the_search_without_spending_the_budget(tmp_path,
                                                                       monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    sampler = optuna.samplers.GridSampler({"lr": [0.02, 0.05, 0.1]})
    result = search(make_plan(epochs=1), SPACE, apply=with_lr, budget=SearchBudget(trials=10),
                    sampler=sampler)
    assert result.stop_reason == "exhausted" and len(result.outcomes) == 3
    assert sorted(o.params["lr"] for o in result.outcomes) == [0.02, 0.05, 0.1]


def _last(outcome) -> dict:
    manifest = Path(outcome.run_path) / "checkpoints" / "last.pt.manifest.json"
    return json.loads(manifest.read_text())["position"]


def test_an_update_cap_stops_right_after_the_nth_update_keeping_the_last_epoch(
        tmp_path, monkeypatch) -> None:
    # 3 batches an epoch: the 5th update is inside epoch 1, which is discarded; LAST and
    # the history stay those of epoch 0 (3 committed updates).
    monkeypatch.chdir(tmp_path)
    result = search(make_plan(epochs=3), SPACE, apply=with_lr,
                    budget=SearchBudget(trials=2, updates_per_trial=5))
    for outcome in result.outcomes:
        assert outcome.reason == "updates_cap" and outcome.updates == 5
        assert outcome.epochs == 1 and outcome.best_epoch == 0
        assert _last(outcome)["completed_epoch"] == 0
        assert _last(outcome)["committed_updates"] == 3
        run = __import__("nnx").NNRun.load(outcome.run_id)
        assert [r.epoch for r in run.epoch_records()] == [0]


def test_an_update_cap_on_an_epochs_last_batch_commits_that_epoch(tmp_path,
                                                                  monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = search(make_plan(epochs=3), SPACE, apply=with_lr,
                    budget=SearchBudget(trials=1, updates_per_trial=6))
    (outcome,) = result.outcomes
    assert outcome.epochs == 2 and _last(outcome)["completed_epoch"] == 1


def test_a_median_pruner_prunes_at_validated_epochs(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    storage = optuna.storages.InMemoryStorage()
    queued = optuna.create_study(study_name="p", storage=storage)
    queued.enqueue_trial({"lr": 0.3})    # learns: the median to beat
    queued.enqueue_trial({"lr": 0.01})   # barely moves: worse than the median at epoch 0
    result = search(make_plan(epochs=3), SPACE, apply=with_lr, budget=SearchBudget(trials=2),
                    study_name="p", storage=storage,
                    pruner=optuna.pruners.MedianPruner(n_startup_trials=1, n_warmup_steps=0))
    good, slow = result.outcomes
    assert good.state == "completed" and len(good.observations) == 3
    assert slow.state == "pruned" and slow.reason == "pruned"
    assert [e for e, _ in slow.observations] == [0] and slow.epochs == 1
    trial = queued.trials[1]
    assert trial.state == TrialState.PRUNED
    assert trial.intermediate_values == {0: slow.observations[0][1]}
    assert result.counted == 2  # a pruned trial counts


def test_a_passed_deadline_starts_no_trial(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)

    def slow_apply(plan, params):
        time.sleep(0.3)
        return with_lr(plan, params)

    result = search(make_plan(epochs=1), SPACE, apply=slow_apply,
                    budget=SearchBudget(trials=50, deadline_seconds=0.2))
    # the first trial starts (the deadline has not passed), no trial starts after it
    assert result.stop_reason == "deadline" and len(result.outcomes) == 1


def test_a_deadline_stops_a_running_trial_at_its_next_update(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)

    def late_loader():
        time.sleep(0.4)  # the deadline passes before the first update
        return train_loader()

    result = search(make_plan(epochs=3).with_data(late_loader), SPACE, apply=with_lr,
                    budget=SearchBudget(trials=5, deadline_seconds=0.3))
    (outcome,) = result.outcomes
    assert outcome.reason == "deadline" and outcome.updates == 1
    assert outcome.overrun_seconds is not None and outcome.overrun_seconds > 0
    assert outcome.epochs == 0 and outcome.state == "failed"  # no completed epoch: no LAST
    assert not (Path(outcome.run_path) / "checkpoints" / "last.pt").exists()
    assert result.stop_reason == "deadline"


def test_a_study_made_for_the_other_direction_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    optuna.create_study(study_name="d", storage=_study(tmp_path), direction="maximize")
    from nnx.search import StudyMismatchError

    with pytest.raises(StudyMismatchError, match="direction"):
        search(make_plan(epochs=1), SPACE, apply=with_lr, budget=SearchBudget(trials=1),
               study_name="d", storage=_study(tmp_path))
    assert optuna.load_study(study_name="d", storage=_study(tmp_path)).user_attrs == {}
    assert not (tmp_path / "runs").exists()


def test_a_stored_study_continues_where_it_stopped(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    kw = {"apply": with_lr, "study_name": "s", "storage": _study(tmp_path)}
    first = search(make_plan(epochs=1), SPACE, budget=SearchBudget(trials=2), **kw)
    again = search(make_plan(epochs=1), SPACE, budget=SearchBudget(trials=3), **kw)
    spent = search(make_plan(epochs=1), SPACE, budget=SearchBudget(trials=3), **kw)
    assert [o.number for o in first.outcomes] == [0, 1]
    assert [o.number for o in again.outcomes] == [2] and again.counted == 3
    assert spent.outcomes == () and spent.stop_reason == "budget"
    ids = [o.run_id for o in (*first.outcomes, *again.outcomes)]
    assert len(set(ids)) == 3


class _Interrupt(Callback):
    """Presses Ctrl-C in the second batch; records the cleanup it sees."""

    seen: ClassVar[list[str]] = []

    def on_train_begin(self, ctx) -> None:
        ctx.update_listeners.append(self._update)

    def _update(self, ctx) -> None:
        if ctx.committed_updates == 2:
            raise KeyboardInterrupt

    def on_train_end(self, ctx) -> None:
        _Interrupt.seen.append(type(ctx.error).__name__)


def test_keyboard_interrupt_cleans_up_marks_the_trial_and_propagates(tmp_path,
                                                                     monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _Interrupt.seen = []
    plan = make_plan(epochs=2).with_callback_factories(_Interrupt)
    with pytest.raises(KeyboardInterrupt):
        search(plan, SPACE, apply=with_lr, budget=SearchBudget(trials=3),
               storage=_study(tmp_path), study_name="k")
    assert _Interrupt.seen == ["KeyboardInterrupt"]  # the fit's callback cleanup ran
    (trial,) = optuna.load_study(study_name="k", storage=_study(tmp_path)).trials
    assert trial.state == TrialState.FAIL and trial.user_attrs["nnx.search.reason"] == "cancelled"
    (lease,) = (tmp_path / "runs" / ".leases").iterdir()  # its run's lease is released
    assert _lease_free(lease)
    # the study is consistent: reopened, it continues and counts the cancelled trial
    again = search(make_plan(epochs=2), SPACE, apply=with_lr, budget=SearchBudget(trials=2),
                   storage=_study(tmp_path), study_name="k")
    assert [o.number for o in again.outcomes] == [1] and again.counted == 2


def _lease_free(lease: Path) -> bool:
    import fcntl  # the run lease is an flock on runs/.leases/<id>.lock: free when we can take it

    with open(lease, "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        fcntl.flock(handle, fcntl.LOCK_UN)
    return True


class _BreaksAtSecondEpoch(Callback):
    def on_epoch_begin(self, ctx) -> None:
        if ctx.epoch == 1:
            raise RuntimeError("the second epoch broke")


def test_a_fit_that_raises_keeps_its_run_links_and_committed_epochs(tmp_path,
                                                                     monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    plan = make_plan(epochs=3).with_callback_factories(_BreaksAtSecondEpoch)
    result = search(plan, SPACE, apply=with_lr, budget=SearchBudget(trials=1))
    (outcome,) = result.outcomes
    assert outcome.state == "failed" and outcome.reason == "error"
    assert "the second epoch broke" in outcome.error
    run = __import__("nnx").NNRun.load(outcome.run_id)
    assert outcome.run_path == str(run.path) and Path(outcome.run_path).is_dir()
    assert outcome.epochs == 1 == len(run.epoch_records())
    assert outcome.checkpoint == str(Path(run.checkpoints_dir) / "best.pt")
    assert Path(outcome.checkpoint).is_file()


class _Collect(__import__("logging").Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list = []

    def emit(self, record) -> None:
        self.records.append(record)


def test_optuna_logs_no_traceback_for_a_refusal_and_the_fits_own_for_a_failure(
        tmp_path, monkeypatch) -> None:
    import logging

    from nnx.search import ledger

    monkeypatch.chdir(tmp_path)
    handler = _Collect()
    logging.getLogger("optuna").addHandler(handler)
    try:
        # a configuration error: search() raises it itself, Optuna logs nothing of it
        with pytest.raises(SearchConfigurationError):
            search(make_plan(epochs=1), SPACE, apply=lambda plan, params: "not a plan",
                   budget=SearchBudget(trials=2))
        # a slot given back (another worker took it): not a failure at all
        lost = iter([False])
        real = ledger.may_run
        monkeypatch.setattr(ledger, "may_run", lambda *a: next(lost, True) and real(*a))
        given_back = search(make_plan(epochs=1), SPACE, apply=with_lr,
                            budget=SearchBudget(trials=1))
        assert [o.number for o in given_back.outcomes] == [1]
        assert [r for r in handler.records if r.levelno >= logging.WARNING] == []
        # a fit that raised: Optuna's warning stays, with the fit's own exception
        space = {"mode": CategoricalDistribution(("boom",))}
        search(make_plan(epochs=1), space, apply=_explodes_on("boom"),
               budget=SearchBudget(trials=1))
    finally:
        logging.getLogger("optuna").removeHandler(handler)
    warned = [r for r in handler.records if r.levelno >= logging.WARNING]
    assert warned and "the loader broke" in warned[0].getMessage()
    assert isinstance(warned[0].exc_info[1], RuntimeError)
