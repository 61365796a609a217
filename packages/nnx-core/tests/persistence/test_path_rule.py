"""The path rule (docs/durability.md): every tag, manifest role and lineage parent is one
plain name inside its run, and no symbolic link below the runs root is followed. Each
refusal raises the named error and leaves everything on disk, inside the runs root and
outside it, as it was (a tree snapshot of the whole tmp_path before and after)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches, tiny_model
from _support.disk import tree
from _support.history_journal import epochs, make_run, resumed, states
from safetensors.torch import save_file

import nnx._persistence.point_verify as point_verify
from nnx import NNCheckpoint, NNTrainParams
from nnx._foundation.safe_paths import UnsafePathError
from nnx._persistence.checkpoint_format import read_record
from nnx._persistence.point_manifest import ResumePointError, manifest_path
from nnx.cli import main
from nnx.history import iter_history
from nnx.provenance import read_provenance

PROBES = {
    "load": lambda root, run, tag: NNCheckpoint.load(run, tag, root=root),
    "verify": lambda root, run, tag: NNCheckpoint.verify(run, tag, root=root),
    "resume_point": lambda root, run, tag: NNCheckpoint.resume_point(run, tag, root=root),
    "load_with_training_state":
        lambda root, run, tag: NNCheckpoint.load_with_training_state(run, tag, root=root),
    "load_training_state":
        lambda root, run, tag: NNCheckpoint.load_training_state(run, tag, root=root),
    "load_optimizer_state":
        lambda root, run, tag: NNCheckpoint.load_optimizer_state(run, tag, root=root),
}


def train(root: Path, **extra):
    params = NNTrainParams(n_epochs=2, train_loader=tiny_batches(), scheduler=None,
                           optim=sgd(), **extra)
    return tiny_model(hidden=6).train(params, root=root, verbose=False)


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    root = tmp_path_factory.mktemp("template") / "runs"
    return root, train(root).id


@pytest.fixture
def w(tmp_path, template):
    """A copy of one trained run under tmp_path/runs, and tmp_path/outside with a file."""
    source, run_id = template
    root = tmp_path / "runs"
    shutil.copytree(source, root, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not NNx's\n")
    ck = root / run_id / "checkpoints"
    return SimpleNamespace(tmp=tmp_path, root=root, id=run_id, ck=ck, outside=outside,
                           sidecar=NNCheckpoint.load(run_id, root=root).sidecar)


def refused(w, error, match, action):
    """``action`` raises ``error`` and nothing under tmp_path is created, changed or deleted."""
    before = tree(w.tmp)
    with pytest.raises(error, match=match) as caught:
        action()
    assert tree(w.tmp) == before
    return caught.value


def cli(*argv: str) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(list(argv))
    return code, out.getvalue()


def resume(w):
    tiny_model(hidden=6).train(
        NNTrainParams(n_epochs=1, train_loader=tiny_batches(), scheduler=None, optim=sgd(),
                      resume_from_run_id=w.id, resume_mode="stateful"),
        root=w.root, verbose=False)


@contextlib.contextmanager
def hashed_only_inside(ck: Path):
    """Every file verification hashes lies in the checkpoints directory itself."""
    seen: list[Path] = []
    digest = point_verify.file_sha256

    def spy(path: Path) -> str:
        seen.append(Path(path))
        return digest(path)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(point_verify, "file_sha256", spy)
        yield seen
    assert all(path.parent == ck and not path.is_symlink() for path in seen), seen


def edit_manifest(w, change) -> None:
    """``change(doc, w)`` edits LAST's manifest in place, or returns a replacement."""
    path = manifest_path(w.ck / "last.pt")
    doc = json.loads(path.read_text())
    replaced = change(doc, w)
    path.write_text(json.dumps(doc if replaced is None else replaced))


# -- 1. checkpoint tags ----------------------------------------------------------------------
@pytest.mark.parametrize("probe", sorted(PROBES))
@pytest.mark.parametrize("tag", ["../../x", "../../../outside/secret", "/etc/passwd", "..",
                                 "a/b", "a\\b", ""])
def test_a_tag_that_is_not_a_plain_name_is_refused_before_anything_is_created(w, probe, tag):
    # NNCheckpoint.verify(id, "../../x") used to create runs/x.pt.lock (and "../../../
    # outside/secret" a lock beside the file outside the root).
    error = refused(w, ValueError, "type is not a checkpoint tag",
                    lambda: PROBES[probe](w.root, w.id, tag))
    assert repr(tag) in str(error)


@pytest.mark.parametrize("probe", sorted(PROBES))
@pytest.mark.parametrize("where", ["run", "checkpoints", "checkpoint file"])
def test_a_symlink_below_the_root_is_never_followed(w, probe, where):
    # A whole, valid run lies outside: following the link would read (and lock) it there.
    if where == "run":
        link, target = w.root / w.id, w.outside / w.id
    elif where == "checkpoints":
        link, target = w.ck, w.outside / "checkpoints"
    else:
        link, target = w.ck / "last.pt", w.outside / "last.pt"
    shutil.move(link, target)
    link.symlink_to(target, target_is_directory=target.is_dir())
    error = refused(w, UnsafePathError, "is a symbolic link",
                    lambda: PROBES[probe](w.root, w.id, "last"))
    assert error.link == link and link.as_posix() in str(error)


def test_runs_verify_reports_a_symlinked_checkpoints_directory_and_follows_nothing(w):
    shutil.move(w.ck, w.outside / "checkpoints")
    w.ck.symlink_to(w.outside / "checkpoints", target_is_directory=True)
    before = tree(w.tmp)
    code, out = cli("runs", "verify", w.id, "--root", str(w.root))
    assert code == 1 and f"FAIL last  UnsafePathError: {w.ck.as_posix()} is a symbolic" in out
    assert "ok " not in out
    assert tree(w.tmp) == before


def test_a_verify_of_a_run_that_does_not_exist_creates_no_directory(w):
    refused(w, ResumePointError, r"torn resume point: last\.pt is missing",
            lambda: NNCheckpoint.verify("0" * 32, "last", root=w.root))


def test_the_root_itself_may_be_a_symlink(w):
    alias = w.tmp / "alias"
    alias.symlink_to(w.root, target_is_directory=True)
    assert NNCheckpoint.verify(w.id, "last", root=alias) is not None
    assert NNCheckpoint.load(w.id, "last", root=alias).epoch == 1


# -- 2. manifest roles -----------------------------------------------------------------------
def _extra(name_of):
    def change(doc, w):
        data = (w.outside / "secret.txt").read_bytes()  # the digest a real read would match
        doc["files"]["extra"] = {"name": name_of(w), "size": len(data),
                                 "sha256": hashlib.sha256(data).hexdigest()}
    return change


def _sidecar_named(name_of):
    def change(doc, w):
        data = (w.outside / "secret.txt").read_bytes()
        doc["files"]["sidecar"].update(name=name_of(w), size=len(data),
                                       sha256=hashlib.sha256(data).hexdigest())
    return change


ROLES = {
    "extra role, absolute": (_extra(lambda w: str(w.outside / "secret.txt")),
                             "unknown role 'extra'"),
    "extra role, relative": (_extra(lambda w: "../../../outside/secret.txt"),
                             "unknown role 'extra'"),
    "sidecar, absolute": (_sidecar_named(lambda w: str(w.outside / "secret.txt")),
                          "entry sidecar name is not a file name"),
    "sidecar, relative": (_sidecar_named(lambda w: "../../../outside/secret.txt"),
                          "entry sidecar name is not a file name"),
}


@pytest.mark.parametrize("case", sorted(ROLES))
def test_a_manifest_naming_a_file_outside_the_checkpoints_directory_is_torn(w, case):
    change, message = ROLES[case]
    edit_manifest(w, change)
    for action in (lambda: NNCheckpoint.verify(w.id, "last", root=w.root),
                   lambda: NNCheckpoint.resume_point(w.id, "last", root=w.root),
                   lambda: resume(w)):
        with hashed_only_inside(w.ck):
            error = refused(w, ResumePointError, message, action)
        assert error.kind == "torn" and "last.pt.manifest.json" in str(error)
    before = tree(w.tmp)
    with hashed_only_inside(w.ck):
        code, out = cli("runs", "verify", w.id, "--root", str(w.root))
    assert code == 1 and "FAIL last  torn: last.pt.manifest.json" in out, out
    assert tree(w.tmp) == before


@pytest.mark.parametrize("name", ["sidecar", "compatibility copy", "manifest", "lock"])
def test_a_point_file_that_is_a_symlink_is_refused_naming_the_link(w, name):
    # The link's target holds exactly the bytes the manifest records: following it
    # would have verified.
    link = {"sidecar": w.ck / w.sidecar, "compatibility copy": w.ck / "last.pt.opt.pt",
            "manifest": manifest_path(w.ck / "last.pt"),
            "lock": w.ck / "last.pt.lock"}[name]
    target = w.outside / link.name
    if link.exists():
        shutil.move(link, target)
    else:
        target = w.outside / "secret.txt"
    link.symlink_to(target)
    for action in (lambda: NNCheckpoint.verify(w.id, "last", root=w.root), lambda: resume(w)):
        with hashed_only_inside(w.ck):
            error = refused(w, UnsafePathError, "symbolic link", action)
        assert error.link == link
    before = tree(w.tmp)
    code, out = cli("runs", "verify", w.id, "--root", str(w.root))
    assert code == 1 and "FAIL last  UnsafePathError: " in out and link.name in out, out
    assert tree(w.tmp) == before


# -- 3. malformed manifests: a torn point naming the field, never KeyError / TypeError -----
def _drop(role, key):
    def change(doc, w):
        del doc["files"][role][key]
    return change


MALFORMED = {
    "no sha256": (_drop("sidecar", "sha256"), "entry sidecar has no sha256"),
    "sha256 not hex": (lambda d, w: d["files"]["checkpoint"].update(sha256=5),
                       "entry checkpoint has no sha256"),
    "no size": (_drop("checkpoint", "size"), "entry checkpoint has no size"),
    "no name": (_drop("sidecar", "name"), "entry sidecar name is not a file name: None"),
    "entry not a mapping": (lambda d, w: d["files"].update(sidecar="x"),
                            "entry sidecar is not a mapping"),
    "files a list": (lambda d, w: d.update(files=[]), "has no files"),
    "no checkpoint": (lambda d, w: d["files"].__delitem__("checkpoint"),
                      "lists no checkpoint file"),
    "generation a string": (lambda d, w: d.update(generation="2"), "has no generation"),
    "not a mapping": (lambda d, w: ["format"], "is not a nnx.resume_point/1 manifest"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_manifest_is_a_torn_point_naming_the_field(w, case):
    change, message = MALFORMED[case]
    edit_manifest(w, change)
    for action in (lambda: NNCheckpoint.verify(w.id, "last", root=w.root),
                   lambda: NNCheckpoint.resume_point(w.id, "last", root=w.root),
                   lambda: resume(w)):
        error = refused(w, ResumePointError, message, action)
        assert error.kind == "torn" and "last.pt.manifest.json" in str(error)
    before = tree(w.tmp)
    code, out = cli("runs", "verify", w.id, "--root", str(w.root))
    assert code == 1 and "FAIL last  torn: last.pt.manifest.json" in out, out
    assert tree(w.tmp) == before


# -- 4. deep and huge manifests: named errors and a damaged row, never a traceback -----------
BAD_DOCUMENTS = {
    "deep": lambda: '{"a":' * 100_000 + "1" + "}" * 100_000,
    "huge": lambda: " " * (16 * 1024 * 1024 + 1) + "{}",
}


@pytest.mark.parametrize("kind", sorted(BAD_DOCUMENTS))
def test_a_deep_or_huge_manifest_is_named_by_every_reader(w, kind, capsys, monkeypatch):
    manifest = manifest_path(w.ck / "last.pt")
    manifest.write_text(BAD_DOCUMENTS[kind]())
    for action in (lambda: NNCheckpoint.verify(w.id, "last", root=w.root),
                   lambda: NNCheckpoint.resume_point(w.id, "last", root=w.root),
                   lambda: resume(w)):
        error = refused(w, ResumePointError, r"last\.pt\.manifest\.json is unreadable",
                        action)
        assert error.kind == "torn"
    before = tree(w.tmp)
    code, out = cli("runs", "verify", w.id, "--root", str(w.root))
    assert code == 1 and "FAIL last  torn: last.pt.manifest.json is unreadable" in out, out
    monkeypatch.chdir(w.tmp)
    capsys.readouterr()
    assert main(["runs", "list"]) == 1
    listed = capsys.readouterr()
    assert "Traceback" not in listed.out + listed.err
    row = next(line for line in listed.out.splitlines() if line.startswith(w.id))
    assert f"damaged  runs/{w.id}/checkpoints/last.pt.manifest.json: " in row
    assert tree(w.tmp) == before


# -- 5. lineage ------------------------------------------------------------------------------
@pytest.fixture
def family(tmp_path):
    """runs/P (epochs 0-5), runs/C resumed from it at epoch 2, and a foreign run outside
    the root whose records must never appear."""
    root = tmp_path / "runs"
    make_run(root, "P", epochs(0, 6, 1), csv=True)
    foreign = make_run(tmp_path, "elsewhere", epochs(0, 6, 1, start=900), csv=True)
    return root, foreign


BAD_LINKS = {
    "source_run ../elsewhere": (dict(resume=resumed("../elsewhere", 2)), "'../elsewhere'"),
    "parent_run_id ../elsewhere": (dict(parent="../elsewhere", resume=resumed("P", 2)),
                                   "'../elsewhere'"),
    "absolute parent": (dict(resume=resumed("{foreign}", 2)), "is not a run id"),
    "source_checkpoint ../../x": (dict(resume=resumed("P", None, "../../x")), "'../../x'"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINKS))
def test_a_lineage_parent_that_is_not_a_plain_name_is_never_read(tmp_path, family, case):
    root, foreign = family
    kwargs, named = BAD_LINKS[case]
    if kwargs["resume"]["source_run"] == "{foreign}":
        kwargs["resume"]["source_run"] = str(foreign)
    child = epochs(3, 2, 1, start=100)
    make_run(root, "C", child, **kwargs)
    before = tree(tmp_path)
    with pytest.warns(RuntimeWarning, match=rf"lineage of run C: .*{named}.*starting at "
                                            "this run"):
        got = list(iter_history("C", root=root, lineage=True))
    assert states(got) == states(child)
    assert tree(tmp_path) == before


@pytest.mark.parametrize("where", ["run", "checkpoints"])
def test_a_lineage_parent_reached_through_a_symlink_is_never_read(tmp_path, family, where):
    root, foreign = family
    if where == "run":  # runs/P is a link to the foreign run
        shutil.rmtree(root / "P")
        link = root / "P"
        link.symlink_to(foreign, target_is_directory=True)
        resume_record = resumed("P", 2)
    else:  # P's checkpoints (which give the branch epoch) are a link to elsewhere
        (foreign / "checkpoints").mkdir()
        link = root / "P" / "checkpoints"
        link.symlink_to(foreign / "checkpoints", target_is_directory=True)
        resume_record = resumed("P", None)
    child = epochs(3, 2, 1, start=100)
    make_run(root, "C", child, resume=resume_record)
    before = tree(tmp_path)
    with pytest.warns(RuntimeWarning, match=rf"{link.as_posix()} is a symbolic link.*starting "
                                            "at this run"):
        got = list(iter_history("C", root=root, lineage=True))
    assert states(got) == states(child)
    assert tree(tmp_path) == before


def test_a_deeply_nested_metadata_yaml_is_no_lineage_and_no_traceback(tmp_path, family):
    root, _ = family
    child = epochs(3, 2, 1, start=100)
    run = make_run(root, "C", child, resume=resumed("P", 2))
    (run / "metadata.yaml").write_text("resume: " + "[" * 5000 + "]" * 5000 + "\n")
    assert states(iter_history("C", root=root, lineage=True)) == states(child)


# -- 6. the other JSON under a run: provenance files and safetensors headers ------------------
def test_a_deeply_nested_provenance_file_is_ignored_with_a_warning(w):
    (w.root / w.id / "provenance.json").write_text("[" * 100_000 + "]" * 100_000)
    with pytest.warns(RuntimeWarning, match=r"provenance\.json.*nests too deeply"):
        assert read_provenance(w.root / w.id) is None


def test_a_deeply_nested_safetensors_header_is_a_value_error(tmp_path):
    path = tmp_path / "deep.safetensors"
    save_file({"w": torch.zeros(1)}, path,
              metadata={"nnx": "[" * 100_000 + "]" * 100_000})
    with pytest.raises(ValueError, match=r"the NNx header of deep\.safetensors nests"):
        read_record(path)
