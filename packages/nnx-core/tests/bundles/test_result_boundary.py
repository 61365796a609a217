"""inspect_bundle_result (spec §27): the bundle boundary as a value."""

from __future__ import annotations

import pickle
import shutil

import pytest
import torch
from _support.bundles import live_generation, trained_bundle

from nnx.bundles import (
    BundleValidationError,
    inspect_bundle,
    inspect_bundle_result,
)
from nnx.result import BoundaryError, Err, Ok


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return trained_bundle(tmp_path_factory.mktemp("bundles"))[0]


def test_a_valid_bundle_gives_ok_with_the_info_inspect_bundle_gives(exported, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the boundary unpickled")

    monkeypatch.setattr(pickle, "loads", never)
    monkeypatch.setattr(torch, "load", never)
    result = inspect_bundle_result(exported)
    assert isinstance(result, Ok) and result.value == inspect_bundle(exported)


@pytest.mark.parametrize("what", ["no path", "empty directory"])
def test_nothing_there_is_artifact_missing(tmp_path, what):
    path = tmp_path / "absent"
    if what == "empty directory":
        path.mkdir()
    result = inspect_bundle_result(path)
    assert isinstance(result, Err)
    error = result.error
    assert isinstance(error, BoundaryError)
    assert (error.code, error.where) == ("artifact_missing", "inspect_bundle_result")
    assert error.context == {"path": path.as_posix()}
    assert isinstance(error.cause, FileNotFoundError)


def test_a_tampered_bundle_is_bundle_invalid_with_the_validation_error(exported, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(exported, copy)
    state = live_generation(copy) / "state.json"
    state.write_bytes(state.read_bytes() + b" ")
    result = inspect_bundle_result(copy)
    assert isinstance(result, Err) and result.error.code == "bundle_invalid"
    assert isinstance(result.error.cause, BundleValidationError)
    with pytest.raises(BundleValidationError):  # the exception-style API is unchanged
        inspect_bundle(copy)


def test_anything_else_propagates(exported, monkeypatch):
    import nnx._persistence.bundle_boundary as boundary

    def boom(path):
        raise RuntimeError("not a declared failure")

    monkeypatch.setattr(boundary, "inspect_bundle", boom)
    with pytest.raises(RuntimeError, match="not a declared"):
        inspect_bundle_result(exported)
