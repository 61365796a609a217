"""validate_bundle (spec §22, Validate): each tampering is refused before any tensor is
built, and inspect_bundle reads only the manifest and state.json."""

from __future__ import annotations

import json
import os
import shutil

import pytest
import torch
from _support.bundles import live_generation, rewrite, rewrite_state, state, trained_bundle

from nnx._persistence import bundle_listing, bundle_read
from nnx._persistence import safetensors_codec as codec
from nnx.bundles import BundleValidationError, inspect_bundle, validate_bundle


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return trained_bundle(tmp_path_factory.mktemp("bundles"))


@pytest.fixture
def bundle(exported, tmp_path, monkeypatch):
    """A fresh copy of the exported bundle; building a tensor fails the test."""
    copy = tmp_path / "copy"
    shutil.copytree(exported[0], copy)

    def never(*args, **kwargs):
        raise AssertionError("validate_bundle built a tensor")

    monkeypatch.setattr(torch, "frombuffer", never)
    monkeypatch.setattr(codec, "decode", never)
    return copy


def test_a_clean_copy_validates_and_inspects(exported, bundle):
    run = exported[1]
    info = validate_bundle(bundle)
    assert (info.capability, info.source_run, info.source_checkpoint, info.epoch) == (
        "resume", run.id, "last", 1)
    assert info.net_params.hidden_dims == (8,) and info.model_params.net.name == "FEED_FWD"
    assert info.components == ("early_stopping", "nnx.update_engine")
    assert info.task == {"kind": "categorical", "num_classes": 3, "labels": [0, 1, 2]}
    assert inspect_bundle(bundle) == info
    names = sorted(os.listdir(live_generation(bundle)))
    assert names == ["model.safetensors", "state.json", "training.safetensors"]


@pytest.mark.parametrize("name", ["state.json", "model.safetensors", "training.safetensors"])
def test_a_flipped_byte_in_any_payload(bundle, name):
    path = live_generation(bundle) / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(BundleValidationError, match="SHA-256"):
        validate_bundle(bundle)


def test_a_truncated_file(bundle):
    path = live_generation(bundle) / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(BundleValidationError, match="bytes; expected"):
        validate_bundle(bundle)


@pytest.mark.parametrize("where", ["generation", "top"])
def test_an_extra_file(bundle, where):
    folder = live_generation(bundle) if where == "generation" else bundle
    (folder / "notes.txt").write_text("hi")
    with pytest.raises(BundleValidationError, match=r"unlisted|not part of the bundle"):
        validate_bundle(bundle)


def test_a_missing_file(bundle):
    (live_generation(bundle) / "training.safetensors").unlink()
    with pytest.raises(BundleValidationError, match="missing"):
        validate_bundle(bundle)


def test_a_symlinked_payload(bundle, tmp_path):
    path = live_generation(bundle) / "model.safetensors"
    outside = tmp_path / "elsewhere.safetensors"
    shutil.copyfile(path, outside)  # same bytes: only the link itself is wrong
    path.unlink()
    path.symlink_to(outside)
    with pytest.raises(BundleValidationError, match="not a regular file"):
        validate_bundle(bundle)


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_payload_is_refused_without_blocking(bundle):
    path = live_generation(bundle) / "model.safetensors"
    path.unlink()
    os.mkfifo(path)
    with pytest.raises(BundleValidationError, match="not a regular file"):
        validate_bundle(bundle)


def test_a_duplicate_json_key(bundle):
    text = (live_generation(bundle) / "state.json").read_text()
    doubled = text.replace('"capability": "resume"', '"capability": "resume", "capability": '
                           '"resume"', 1)
    assert doubled != text
    rewrite(bundle, "state.json", doubled.encode())
    with pytest.raises(BundleValidationError, match="repeats the key 'capability'"):
        validate_bundle(bundle)


def test_a_generation_mismatch(bundle):
    value = state(bundle)
    value["generation"] = "0" * 32
    rewrite_state(bundle, value)
    with pytest.raises(BundleValidationError, match="one generation id throughout"):
        validate_bundle(bundle)


def test_a_manifest_listing_another_generation(bundle):
    manifest = json.loads((bundle / "bundle.json").read_text())
    rel = next(iter(manifest["files"]))
    manifest["files"]["g-" + "1" * 32 + "/state.json"] = manifest["files"].pop(rel)
    (bundle / "bundle.json").write_text(json.dumps(manifest))
    with pytest.raises(BundleValidationError, match="one generation id throughout"):
        validate_bundle(bundle)


def test_a_10000_deep_nested_json(bundle):
    rewrite(bundle, "state.json", b"[" * 10_000 + b"]" * 10_000)
    with pytest.raises(BundleValidationError, match="nests deeper"):
        validate_bundle(bundle)


def test_a_header_holding_an_unreferenced_tensor(bundle):
    value = state(bundle)
    key = next(iter(value["weights"]))
    del value["weights"][key]  # state.json no longer references a tensor the header holds
    rewrite_state(bundle, value)
    with pytest.raises(BundleValidationError, match="does not reference"):
        validate_bundle(bundle)


def test_a_state_outside_the_schema(bundle):
    value = state(bundle)
    value["capability"] = "everything"
    rewrite_state(bundle, value)
    with pytest.raises(BundleValidationError, match="capability"):
        validate_bundle(bundle)


def test_a_malformed_typed_value(bundle):
    value = state(bundle)
    value["record"] = {"$float": "1e999"}
    rewrite_state(bundle, value)
    with pytest.raises(BundleValidationError, match="not a typed value"):
        validate_bundle(bundle)


def test_a_bundle_json_that_is_not_a_manifest(bundle):
    (bundle / "bundle.json").write_text('{"format": "something else"}')
    with pytest.raises(BundleValidationError, match="not an NNx run bundle manifest"):
        inspect_bundle(bundle)


def _swap_for_link(generation, tmp_path, *, change):
    """Move the generation folder out of the bundle and link its name to a copy outside
    holding ``change`` (payload name → bytes) instead."""
    outside = tmp_path / "outside"
    shutil.copytree(generation, outside)
    for name, data in change.items():
        (outside / name).write_bytes(data)
    os.rename(generation, tmp_path / "held")
    generation.symlink_to(outside, target_is_directory=True)


@pytest.mark.parametrize("reader", [validate_bundle, inspect_bundle])
def test_a_symlinked_generation_folder(bundle, tmp_path, reader):
    _swap_for_link(live_generation(bundle), tmp_path, change={})  # same bytes, via a link
    with pytest.raises(BundleValidationError, match=r"not part of the bundle|symbolic link"):
        reader(bundle)


@pytest.mark.skipif(not bundle_listing._DIR_FD, reason="no directory descriptors here")
def test_a_generation_folder_swapped_after_the_listing_is_never_followed(bundle, tmp_path,
                                                                         monkeypatch):
    # The swap lands between the listing check and the payload reads; every payload is
    # read from the directory that was checked, never through the link.
    generation = live_generation(bundle)
    original = {name: (generation / name).read_bytes() for name in os.listdir(generation)}
    check = bundle_read.check_listing

    def check_then_swap(*args):
        check(*args)
        _swap_for_link(generation, tmp_path, change={"state.json": b"{}"})

    monkeypatch.setattr(bundle_read, "check_listing", check_then_swap)
    assert dict(bundle_read.load_bundle(bundle).payloads) == original
