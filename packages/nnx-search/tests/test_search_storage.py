"""What storage= a search opens: a database it cannot use is refused by name before any
study exists; a stored study given no name gets one derived from what it is for."""

from __future__ import annotations

import optuna
import pytest
from _search_data import make_plan, with_lr
from optuna.distributions import FloatDistribution

from nnx.search import SearchBudget, SearchStorageError, search

SPACE = {"lr": FloatDistribution(0.01, 0.3, log=True)}


def _search(storage: str, **kw):
    return search(make_plan(epochs=1), SPACE, apply=with_lr, budget=SearchBudget(trials=1),
                  storage=storage, **kw)


def test_an_sqlite_path_in_a_missing_directory_is_refused_naming_it(tmp_path,
                                                                    monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    missing = tmp_path / "no-such-dir" / "study.db"
    with pytest.raises(SearchStorageError, match="no-such-dir") as caught:
        _search(f"sqlite:///{missing}", study_name="s")
    assert str(missing) in str(caught.value) and caught.value.storage.endswith("study.db")
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing created, no run


def test_an_sqlite_path_that_is_a_directory_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SearchStorageError, match="is a directory"):
        _search(f"sqlite:///{tmp_path}", study_name="s")
    assert list(tmp_path.iterdir()) == []


def test_a_server_that_cannot_be_reached_is_refused_without_its_password(tmp_path,
                                                                         monkeypatch) -> None:
    pytest.importorskip("psycopg2")
    monkeypatch.chdir(tmp_path)
    url = f"postgresql+psycopg2://user:s3cret@/sweep?host={tmp_path / 'no-server'}"
    with pytest.raises(SearchStorageError, match="cannot be opened") as caught:
        _search(url, study_name="s")
    assert "s3cret" not in str(caught.value) and "sweep" in str(caught.value)
    assert list(tmp_path.iterdir()) == []


def test_a_stored_study_without_a_name_is_named_from_its_identity_and_reopens(
        tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    first = _search(storage)
    printed = capsys.readouterr().err
    assert first.study_name.startswith("nnx-search-") and repr(first.study_name) in printed
    # the same call reopens the same study: its budget (1) is spent
    again = _search(storage)
    assert again.study_name == first.study_name and again.outcomes == ()
    assert [s.study_name for s in optuna.get_all_study_summaries(storage)
            if not s.study_name.endswith("claim")] == [first.study_name]
    # another plan names another study
    other = search(make_plan(epochs=2), SPACE, apply=with_lr, budget=SearchBudget(trials=1),
                   storage=storage)
    assert other.study_name != first.study_name and len(other.outcomes) == 1


def test_an_in_memory_search_prints_no_name(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    search(make_plan(epochs=1), SPACE, apply=with_lr, budget=SearchBudget(trials=1))
    assert "nnx-search-" not in capsys.readouterr().err
