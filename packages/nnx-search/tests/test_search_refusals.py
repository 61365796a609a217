"""Everything search refuses comes before any trial: nothing trained, no trial stored."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from _search_data import MONITOR, make_plan, train_loader, val_loader, with_lr
from optuna.distributions import FloatDistribution

from nnx import Callback, MonitorSpec
from nnx.extend import PlanError
from nnx.search import SearchBudget, search

SPACE = {"lr": FloatDistribution(0.01, 0.3, log=True)}


def _refused(tmp_path: Path, error: type[BaseException], match: str, plan=None, **kw) -> None:
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    args = {"apply": with_lr, "budget": SearchBudget(trials=2), "study_name": "s",
            "storage": storage, **kw}
    with pytest.raises(error, match=match):
        search(make_plan() if plan is None else plan, args.pop("space", SPACE), **args)
    assert not (tmp_path / "runs").exists()  # no trial trained
    if (tmp_path / "study.db").exists():
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        assert names == [] or optuna.load_study(study_name="s", storage=storage).trials == []


def test_an_invalid_plan_is_refused_with_every_diagnostic(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    broken = make_plan().with_data(None, val=None)
    _refused(tmp_path, PlanError, "data.train", plan=broken)


def test_a_monitor_other_than_the_plans_validation_monitor_is_refused(tmp_path,
                                                                       monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _refused(tmp_path, ValueError, "the search scores by",
             monitor=MonitorSpec(metric="loss", min_delta=0.5))
    _refused(tmp_path, ValueError, "validation MonitorSpec",
             plan=make_plan(monitor=MonitorSpec(metric="loss", split="train")))
    _refused(tmp_path, ValueError, "validation MonitorSpec", plan=make_plan(monitor=None))


def test_borrowed_callbacks_and_a_capped_own_step_are_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _refused(tmp_path, ValueError, "borrowed callbacks",
             plan=make_plan().with_callbacks(Callback()))
    own_step = make_plan().with_step_fns(lambda ctx: None)
    _refused(tmp_path, ValueError, "updates_per_trial needs a step", plan=own_step,
             budget=SearchBudget(trials=2, updates_per_trial=3))


def test_borrowed_data_loaders_are_refused_naming_the_field(tmp_path, monkeypatch) -> None:
    # A loader object (not a factory) would be iterated by every trial: shared state.
    monkeypatch.chdir(tmp_path)
    _refused(tmp_path, ValueError, "data.train: .*zero-argument factory",
             plan=make_plan().with_data(train_loader()))
    _refused(tmp_path, ValueError, "data.val: .*zero-argument factory",
             plan=make_plan().with_data(train_loader, val=val_loader()))


def test_a_bad_space_or_budget_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    _refused(tmp_path, ValueError, "non-empty mapping", space={})
    _refused(tmp_path, TypeError, "SearchBudget", budget=3)
    _refused(tmp_path, TypeError, "apply must be", apply=None)


def test_a_multi_rank_process_group_is_refused_first(tmp_path, monkeypatch) -> None:
    # A fake two-rank group: the refusal reads torch.distributed's world size, and comes
    # before anything else is looked at (the plan here is not even a plan).
    import torch.distributed as dist  # the fake group patches this module's functions

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    with pytest.raises(RuntimeError, match="2 ranks"):
        search("not a plan", {}, apply=None, budget=None)  # type: ignore[arg-type]
    assert not (tmp_path / "runs").exists()


def test_a_stored_study_for_another_space_monitor_or_plan_is_refused(
        tmp_path, monkeypatch, database_url) -> None:
    monkeypatch.chdir(tmp_path)
    storage = database_url
    first = search(make_plan(epochs=1), SPACE, apply=with_lr, budget=SearchBudget(trials=1),
                   study_name="s", storage=storage)
    assert first.counted == 1
    runs = sorted((tmp_path / "runs").iterdir())
    other_space = {"lr": FloatDistribution(0.01, 0.5, log=True)}
    other_monitor = make_plan(epochs=1, monitor=MonitorSpec(metric="loss", min_delta=0.1))
    from nnx.search import StudyMismatchError

    for plan, space, field in ((make_plan(epochs=1), other_space, "space"),
                               (other_monitor, SPACE, "monitor"),
                               (make_plan(epochs=2), SPACE, "plan")):
        with pytest.raises(StudyMismatchError, match=field) as caught:
            search(plan, space, apply=with_lr, budget=SearchBudget(trials=5),
                   study_name="s", storage=storage)
        assert caught.value.fields == (field,)
        assert len(optuna.load_study(study_name="s", storage=storage).trials) == 1
        assert sorted((tmp_path / "runs").iterdir()) == runs
    assert make_plan().train.monitor == MONITOR


def _mine(plan):
    from nnx.search.space import SearchSpace
    from nnx.search.study_record import study_identity

    return study_identity(SearchSpace(SPACE), MONITOR, "min", plan)


def test_a_stored_study_with_trials_but_no_search_identity_is_refused(
        tmp_path, monkeypatch, database_url) -> None:
    # Another program's study: its trials must not spend this search's budget.
    monkeypatch.chdir(tmp_path)
    storage = database_url
    foreign = optuna.create_study(study_name="s", storage=storage)
    foreign.optimize(lambda t: t.suggest_float("lr", 0.01, 0.3), n_trials=2)
    from nnx.search import StudyMismatchError

    with pytest.raises(StudyMismatchError, match="identity") as caught:
        search(make_plan(epochs=1), SPACE, apply=with_lr, budget=SearchBudget(trials=5),
               study_name="s", storage=storage)
    assert caught.value.fields == ("identity",)
    study = optuna.load_study(study_name="s", storage=storage)
    assert len(study.trials) == 2 and study.user_attrs == {}
    assert not (tmp_path / "runs").exists()


def test_a_claimed_study_whose_identity_never_lands_is_refused_after_waiting(
        tmp_path, monkeypatch) -> None:
    # The claim's winner died before recording the identity: the others wait, then refuse.
    from nnx.search import StudyMismatchError, study_record

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(study_record, "WAIT_SECONDS", 0.3)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    optuna.create_study(study_name="s", storage=storage)
    assert study_record.take_claim(storage, "s")
    with pytest.raises(StudyMismatchError) as caught:
        search(make_plan(epochs=1), SPACE, apply=with_lr, budget=SearchBudget(trials=1),
               study_name="s", storage=storage)
    assert caught.value.fields == ("identity",)
    assert optuna.load_study(study_name="s", storage=storage).user_attrs == {}
    assert not (tmp_path / "runs").exists()


def test_two_workers_racing_on_a_new_study_end_with_one_identity(
        tmp_path, monkeypatch, database_url) -> None:
    # Workers A and B (another plan) both open the new study and find no identity. A wins
    # the claim; its record lands while B waits. Before single-writer claims, B wrote an
    # identity of its own and trained under its own token.
    from nnx.search import StudyMismatchError, study_record

    monkeypatch.chdir(tmp_path)
    storage = database_url
    study_a = optuna.create_study(study_name="s", storage=storage)
    assert study_record.take_claim(storage, "s")  # A won, has not recorded yet
    landed: list[str] = []

    def a_records_meanwhile(poll_seconds: float) -> None:
        if not landed:
            landed.append(study_record.record_identity(study_a, _mine(make_plan(epochs=1))))

    monkeypatch.setattr(study_record, "_sleep", a_records_meanwhile)
    with pytest.raises(StudyMismatchError) as caught:
        search(make_plan(epochs=2), SPACE, apply=with_lr, budget=SearchBudget(trials=2),
               study_name="s", storage=storage)
    assert caught.value.fields == ("plan",) and landed
    stored = optuna.load_study(study_name="s", storage=storage)
    assert stored.user_attrs[study_record.IDENTITY_ATTR]["token"] == landed[0]
    assert stored.trials == [] and not (tmp_path / "runs").exists()
    # A worker with A's plan joins under A's token.
    joined = search(make_plan(epochs=1), SPACE, apply=with_lr, budget=SearchBudget(trials=1),
                    study_name="s", storage=storage)
    from nnx.search.trial import attempt_for

    assert joined.outcomes[0].attempt_id == attempt_for(landed[0], 0)
    assert optuna.load_study(study_name="s", storage=storage).user_attrs[
        study_record.IDENTITY_ATTR]["token"] == landed[0]


def test_an_identity_changed_mid_search_stops_it_before_the_next_trial(
        tmp_path, monkeypatch, database_url) -> None:
    from nnx.search import StudyMismatchError, study_record

    monkeypatch.chdir(tmp_path)
    storage = database_url

    def apply_and_overwrite(plan, params):
        study = optuna.load_study(study_name="s", storage=storage)
        study.set_user_attr(study_record.IDENTITY_ATTR, {**_mine(make_plan(epochs=1)),
                                                     "token": "another-worker"})
        return with_lr(plan, params)

    with pytest.raises(StudyMismatchError) as caught:
        search(make_plan(epochs=1), SPACE, apply=apply_and_overwrite,
               budget=SearchBudget(trials=3), study_name="s", storage=storage)
    assert caught.value.fields == ("identity",)
    assert len(optuna.load_study(study_name="s", storage=storage).trials) == 1
