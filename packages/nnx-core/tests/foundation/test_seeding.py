"""set_seed, worker seeding and RNG snapshots (§13, §13.2)."""

from __future__ import annotations

import io
import os
import random

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from nnx._foundation.seeding import (
    capture_rng_state,
    dataloader_worker_init_fn,
    restore_rng_state,
    set_seed,
)


@pytest.fixture(autouse=True)
def _keep_global_state(monkeypatch):
    """set_seed mutates process-wide state; give every test a clean slate back."""
    for name in ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG"):
        if name in os.environ:
            monkeypatch.setenv(name, os.environ[name])
        else:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(torch.backends.cudnn, "deterministic", torch.backends.cudnn.deterministic)
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", torch.backends.cudnn.benchmark)
    state = capture_rng_state()
    yield
    restore_rng_state(state)


@pytest.fixture
def deterministic_calls(monkeypatch):
    """Record use_deterministic_algorithms calls instead of flipping the global switch.

    The real call imports torch._inductor (about 4 s on first use) and would leak
    into every later test; what set_seed must do is make the call.
    """
    calls: list[bool] = []
    monkeypatch.setattr(torch, "use_deterministic_algorithms", lambda mode: calls.append(mode))
    return calls


def draws() -> tuple[float, float, list[float]]:
    return random.random(), float(np.random.rand()), torch.rand(3).tolist()


def test_set_seed_twice_gives_identical_draws():
    set_seed(123)
    first = draws()
    set_seed(123)
    assert draws() == first
    set_seed(124)
    assert draws() != first


def test_set_seed_pins_cudnn_and_strict_opts_into_deterministic_algorithms(deterministic_calls):
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = False, True
    set_seed(0)
    assert torch.backends.cudnn.deterministic and not torch.backends.cudnn.benchmark
    assert deterministic_calls == []  # non-strict leaves the setting alone
    assert os.environ["PYTHONHASHSEED"] == "0"
    assert "CUBLAS_WORKSPACE_CONFIG" not in os.environ
    set_seed(0, strict=True)
    assert deterministic_calls == [True]
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"


def test_strict_keeps_an_existing_cublas_setting(monkeypatch, deterministic_calls):
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")
    set_seed(1, strict=True)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"


@pytest.mark.parametrize("seed", [-1, 1.0, True, "1", 2**32])
def test_bad_seed_refused_before_any_stream_changes(seed):
    before = capture_rng_state()
    with pytest.raises(ValueError, match="seed must be an integer"):
        set_seed(seed)
    now = draws()
    restore_rng_state(before)
    assert now == draws()


def test_numpy_integer_seed_accepted():
    set_seed(np.int64(9))
    first = draws()
    set_seed(9)
    assert draws() == first


def test_capture_restore_rewinds_every_stream():
    set_seed(5)
    state = capture_rng_state()
    first = draws()
    np.random.standard_normal()  # leaves a cached gauss in NumPy's state
    state_with_gauss = capture_rng_state()
    gauss_next = np.random.standard_normal()
    restore_rng_state(state)
    assert draws() == first
    restore_rng_state(state_with_gauss)
    assert np.random.standard_normal() == gauss_next


def test_rng_state_survives_weights_only_round_trip():
    set_seed(6)
    buffer = io.BytesIO()
    torch.save(capture_rng_state(), buffer)
    first = draws()
    buffer.seek(0)
    restore_rng_state(torch.load(buffer, weights_only=True))
    assert draws() == first


def test_the_625_word_states_are_saved_as_tensors_and_older_list_snapshots_still_load():
    set_seed(9)
    state = capture_rng_state()
    # One object each for torch.save, not 625 (a Python call apiece in its pickler).
    assert isinstance(state["python"][1], torch.Tensor)
    assert isinstance(state["numpy"]["key"], torch.Tensor)
    first = draws()
    older = {**state, "python": (state["python"][0], tuple(state["python"][1].tolist()),
                                 state["python"][2]),
             "numpy": {**state["numpy"], "key": state["numpy"]["key"].tolist()}}
    restore_rng_state(older)
    assert draws() == first


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda s: s.update(version=2),
        lambda s: s["numpy"].update(key=torch.tensor([1, 2, 3])),
        lambda s: s.update(python=(3, torch.tensor([1, 2]), None)),
        lambda s: s.update(python=(3,)),
        lambda s: s.pop("numpy"),
        lambda s: s["numpy"].update(key=[1, 2, 3]),
        lambda s: s.update(torch=torch.zeros(3, dtype=torch.uint8)),
        lambda s: s.update(python=(3, (1, 2), None)),
        lambda s: s.update(cuda="nope"),
    ],
)
def test_malformed_state_refused_and_no_stream_changes(corrupt):
    set_seed(7)
    state = capture_rng_state()
    corrupt(state)
    set_seed(8)
    expected_state = capture_rng_state()
    with pytest.raises(ValueError, match="RNG state"):
        restore_rng_state(state)
    now = draws()
    restore_rng_state(expected_state)
    assert now == draws()


class _Draws(Dataset[tuple[float, float]]):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> tuple[float, float]:
        return random.random(), float(np.random.rand())


def test_worker_init_fn_seeds_from_torch_initial_seed():
    torch.manual_seed(11)  # stands in for the worker's base_seed + worker_id
    dataloader_worker_init_fn(0)
    first = draws()[:2]
    torch.manual_seed(12)
    dataloader_worker_init_fn(1)
    second = draws()[:2]
    torch.manual_seed(11)
    dataloader_worker_init_fn(0)
    assert draws()[:2] == first != second
    with pytest.raises(ValueError, match="worker_id"):
        dataloader_worker_init_fn(-1)


def _worker_draws(seed: int) -> list[list[float]]:
    set_seed(seed)
    loader = DataLoader(
        _Draws(), batch_size=2, num_workers=2, worker_init_fn=dataloader_worker_init_fn
    )
    return [torch.stack(batch).flatten().tolist() for batch in loader]


def test_real_workers_differ_and_runs_repeat():
    first = _worker_draws(3)
    assert first == _worker_draws(3)
    assert first[0] != first[1]  # worker 0 and worker 1 drew different values
