"""Publication by generation (spec §22): a new generation is staged and checked, then
bundle.json is replaced atomically; an export interrupted at any step leaves the
previous bundle valid and reconstructible; the replaced generation stays until the
next export, older ones and an interrupted export's leftovers are cleared."""

from __future__ import annotations

import os

import pytest
import torch
from _support.bundles import train

from nnx._persistence import bundle_publish
from nnx.bundles import export_bundle, reconstruct_bundle, validate_bundle


@pytest.fixture(scope="module")
def run_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    return train(root), root


def _generations(bundle):
    return sorted(name for name in os.listdir(bundle) if name.startswith("g-"))


def test_the_replaced_generation_stays_until_the_next_export(run_root, tmp_path):
    run, root = run_root
    first = export_bundle(run.id, tmp_path / "b", root=root).generation
    second = export_bundle(run.id, tmp_path / "b", root=root).generation
    assert _generations(tmp_path / "b") == sorted([f"g-{first}", f"g-{second}"])
    third = export_bundle(run.id, tmp_path / "b", root=root).generation
    assert _generations(tmp_path / "b") == sorted([f"g-{second}", f"g-{third}"])
    assert validate_bundle(tmp_path / "b").generation == third


class Injected(RuntimeError):
    pass


def _fail_on(calls: int):
    count = {"n": 0}

    def fail(*args, **kwargs):
        count["n"] += 1
        if count["n"] >= calls:
            raise Injected("injected failure")
        return original_write(*args, **kwargs)

    original_write = bundle_publish.write_payload
    return fail


@pytest.mark.parametrize("step", ["first payload", "second payload", "staged check",
                                  "manifest replace"])
def test_an_interrupted_export_leaves_the_previous_bundle(run_root, tmp_path, monkeypatch,
                                                          step):
    run, root = run_root
    previous = export_bundle(run.id, tmp_path / "b", root=root)
    expected = reconstruct_bundle(tmp_path / "b").model.net.state_dict()
    if step.endswith("payload"):
        monkeypatch.setattr(bundle_publish, "write_payload",
                            _fail_on(1 if step == "first payload" else 2))
    elif step == "staged check":
        original = bundle_publish.publish_generation

        def failing(root_, generation, files, live, check_staged):
            def check(*args):
                check_staged(*args)  # the staged generation passed validation ...
                raise Injected("injected failure")  # ... and the process died right after
            return original(root_, generation, files, live, check)

        monkeypatch.setattr("nnx._surface.bundle_export.publish_generation", failing)
    else:
        def replace(root_, data):
            raise Injected("injected failure")

        monkeypatch.setattr(bundle_publish, "replace_manifest", replace)
    with pytest.raises(Injected):
        export_bundle(run.id, tmp_path / "b", root=root)
    monkeypatch.undo()
    assert len(_generations(tmp_path / "b")) == 2  # the interrupted generation is left over
    assert validate_bundle(tmp_path / "b").generation == previous.generation
    rebuilt = reconstruct_bundle(tmp_path / "b").model.net.state_dict()
    assert all(torch.equal(rebuilt[k], expected[k]) for k in expected)
    after = export_bundle(run.id, tmp_path / "b", root=root)  # leftovers cleared
    assert _generations(tmp_path / "b") == sorted(
        [f"g-{previous.generation}", f"g-{after.generation}"])


def test_a_stranded_manifest_temp_is_ignored_then_cleared(run_root, tmp_path):
    run, root = run_root
    export_bundle(run.id, tmp_path / "b", root=root)
    (tmp_path / "b" / ".bundle.json.0123abcd").write_text("half a manifest")
    validate_bundle(tmp_path / "b")
    export_bundle(run.id, tmp_path / "b", root=root)
    assert not (tmp_path / "b" / ".bundle.json.0123abcd").exists()


def _interrupt_first_export(run, root, target, monkeypatch):
    """Kill an export into a fresh ``target`` after its first payload is written."""
    monkeypatch.setattr(bundle_publish, "write_payload", _fail_on(2))
    with pytest.raises(Injected):
        export_bundle(run.id, target, root=root)
    monkeypatch.undo()


def test_an_interrupted_first_export_is_cleared_by_the_retry(run_root, tmp_path, monkeypatch):
    run, root = run_root
    target = tmp_path / "b"
    _interrupt_first_export(run, root, target, monkeypatch)
    (target / ".bundle.json.0123abcd").write_text("half a manifest")
    (left,) = _generations(target)
    assert not (target / "bundle.json").exists() and os.listdir(target / left)
    info = export_bundle(run.id, target, root=root)  # not "neither empty nor a run bundle"
    assert sorted(os.listdir(target)) == ["bundle.json", f"g-{info.generation}"]
    assert validate_bundle(target).generation == info.generation


@pytest.mark.parametrize("extra", ["notes.txt", "g-{gen}/notes.txt", "link"])
def test_leftovers_beside_anything_else_are_still_refused(run_root, tmp_path, monkeypatch,
                                                          extra):
    from nnx.bundles import BundleExportError

    run, root = run_root
    target = tmp_path / "b"
    _interrupt_first_export(run, root, target, monkeypatch)
    (left,) = _generations(target)
    if extra == "link":
        os.symlink(tmp_path, target / ("g-" + "0" * 32))
    else:
        (target / extra.format(gen=left[2:])).write_text("mine")
    before = sorted(str(p.relative_to(target)) for p in target.rglob("*"))
    with pytest.raises(BundleExportError, match="neither empty nor a run bundle"):
        export_bundle(run.id, target, root=root)
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*")) == before
