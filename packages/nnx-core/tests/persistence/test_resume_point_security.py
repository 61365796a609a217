"""Resume-point integrity (spec §4.2, §14.3): verification never unpickles, a lost
manifest is torn, a manifest naming another checkpoint is torn, the compatibility copy
always matches its point, orphans are reported and removed, safetensors points verify."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest
import torch

from nnx import ModelCheckpoint, NNCheckpoint, NNModel, NNParams, NNTrainParams
from nnx._persistence.point_manifest import ResumePointError, manifest_path
from nnx.cli import main


def net_params() -> NNParams:
    return NNParams(input_dim=3, output_dim=2, hidden_dims=(4,))


def trained(root: Path, n_epochs: int = 2, callbacks: list | None = None):
    torch.manual_seed(0)
    batches = [(torch.randn(6, 3), torch.randint(0, 2, (6,))) for _ in range(2)]
    run = NNModel(net_params=net_params()).train(
        NNTrainParams(n_epochs=n_epochs, train_loader=batches, val_loader=batches),
        callbacks=callbacks or [], verbose=False, root=root)
    return run, batches


class Planted:
    """Unpickling this creates ``marker``: proof that something executed the pickle."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def planted_bytes(marker: Path) -> bytes:
    buffer = io.BytesIO()
    torch.save({"optimizer": Planted(marker), "generation": 2}, buffer)
    return buffer.getvalue()


def files(directory: Path) -> dict[str, bytes]:
    """Everything in a directory but the lock files verification may create."""
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())
            if p.is_file() and not p.name.endswith(".lock")}


def cli(*argv: str) -> tuple[int, str]:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(list(argv))
    return code, out.getvalue()


def refused_everywhere(root: Path, run_id: str, batches, kind: str) -> None:
    """NNCheckpoint.verify, `nnx runs verify` and a stateful / auto resume all refuse the
    point, and none of them changes a file or reserves a run."""
    ckdir = root / run_id / "checkpoints"
    before, runs_before = files(ckdir), sorted(p.name for p in root.iterdir())
    with pytest.raises(ResumePointError) as info:
        NNCheckpoint.verify(run_id, "last", root=root)
    assert info.value.kind == kind
    code, out = cli("runs", "verify", run_id, "--root", str(root))
    assert code == 1 and f"FAIL last  {kind}:" in out, out
    for mode in ("stateful", "auto"):
        with pytest.raises(ResumePointError):
            NNModel(net_params=net_params()).train(
                NNTrainParams(n_epochs=1, train_loader=batches, resume_from_run_id=run_id,
                              resume_mode=mode), verbose=False, root=root)
    assert files(ckdir) == before
    assert sorted(p.name for p in root.iterdir()) == runs_before


# -- 1. a digest mismatch is judged without opening the file --------------------------
def test_a_tampered_sidecar_is_corrupted_and_never_unpickled(tmp_path):
    run, batches = trained(tmp_path / "runs")
    marker = tmp_path / "executed"
    side = run.checkpoints_dir / "last.pt.opt.2.pt"
    side.unlink()  # break the compatibility hard link; only the sidecar is replaced
    side.write_bytes(planted_bytes(marker))
    refused_everywhere(tmp_path / "runs", run.id, batches, "corrupted")
    assert not marker.exists()


# -- 2. a matching digest does not make a pickle safe -----------------------------------
def test_a_planted_sidecar_whose_manifest_was_rewritten_is_refused_unexecuted(tmp_path):
    root = tmp_path / "runs"
    run, batches = trained(root)
    marker = tmp_path / "executed"
    ckdir = run.checkpoints_dir
    data = planted_bytes(marker)
    for name in ("last.pt.opt.2.pt", "last.pt.opt.pt"):  # the sidecar and its copy
        (ckdir / name).unlink()
        (ckdir / name).write_bytes(data)
    path = manifest_path(ckdir / "last.pt")
    doc = json.loads(path.read_text())
    doc["files"]["sidecar"].update(sha256=hashlib.sha256(data).hexdigest(), size=len(data))
    path.write_text(json.dumps(doc))
    assert NNCheckpoint.verify(run.id, "last", root=root) is not None  # bytes match
    before, runs_before = files(ckdir), sorted(p.name for p in root.iterdir())
    for mode in ("stateful", "auto"):
        with pytest.raises(ResumePointError, match=r"corrupted .*last\.pt\.opt\.2\.pt"):
            NNModel(net_params=net_params()).train(
                NNTrainParams(n_epochs=1, train_loader=batches, resume_from_run_id=run.id,
                              resume_mode=mode), verbose=False, root=root)
    with pytest.raises(ResumePointError, match=r"last\.pt\.opt\.2\.pt"):
        NNCheckpoint.load_training_state(run.id, root=root)
    assert not marker.exists()
    assert files(ckdir) == before and sorted(p.name for p in root.iterdir()) == runs_before


# -- 3. deleting the manifest does not switch the checks off ----------------------------
def test_a_checkpoint_that_lost_its_manifest_is_torn(tmp_path):
    root = tmp_path / "runs"
    run, batches = trained(root)
    ckdir = run.checkpoints_dir
    payload = torch.load(ckdir / "last.pt", weights_only=True)
    first = next(iter(payload["state_dict"]))
    payload["state_dict"][first].view(-1)[0] += 1.0  # a flipped weight
    torch.save(payload, ckdir / "last.pt")
    manifest_path(ckdir / "last.pt").unlink()
    refused_everywhere(root, run.id, batches, "torn")
    with pytest.raises(ResumePointError, match=r"manifest last\.pt\.manifest\.json is missing"):
        NNCheckpoint.verify(run.id, "last", root=root)


def test_a_checkpoint_from_before_manifests_still_verifies_as_legacy(tmp_path):
    root = tmp_path / "runs"
    run, batches = trained(root)
    ckdir = run.checkpoints_dir
    payload = torch.load(ckdir / "last.pt", weights_only=True)
    for key in ("generation", "checkpoint_id", "sidecar"):
        del payload[key]
    torch.save(payload, ckdir / "last.pt")
    manifest_path(ckdir / "last.pt").unlink()
    assert NNCheckpoint.verify(run.id, "last", root=root) is None
    code, out = cli("runs", "verify", run.id, "--root", str(root))
    assert code == 0 and "ok  last  legacy" in out.splitlines(), out
    # Its training state is the fixed .opt.pt: read as plain data too, never unpickled.
    assert NNCheckpoint.load_training_state(run.id, root=root)["epoch"] == 1
    marker = tmp_path / "executed"
    (ckdir / "last.pt.opt.pt").unlink()
    (ckdir / "last.pt.opt.pt").write_bytes(planted_bytes(marker))
    with pytest.raises(ResumePointError, match=r"last\.pt\.opt\.pt"):
        NNModel(net_params=net_params()).train(
            NNTrainParams(n_epochs=1, train_loader=batches, resume_from_run_id=run.id),
            verbose=False, root=root)
    assert not marker.exists()


# -- 4. a manifest that names another checkpoint is torn --------------------------------
@pytest.mark.parametrize("field", ["checkpoint_id", "generation"])
def test_a_manifest_naming_another_checkpoint_is_torn(tmp_path, field):
    root = tmp_path / "runs"
    run, batches = trained(root)
    ckdir = run.checkpoints_dir
    path = manifest_path(ckdir / "last.pt")
    doc = json.loads(path.read_text())
    if field == "checkpoint_id":
        doc["checkpoint_id"] = "0" * 32
    else:  # generation 7, with the sidecar renamed to match: only the checkpoint disagrees
        doc["generation"] = 7
        doc["files"]["sidecar"]["name"] = "last.pt.opt.7.pt"
        (ckdir / "last.pt.opt.2.pt").rename(ckdir / "last.pt.opt.7.pt")
    path.write_text(json.dumps(doc))
    with pytest.raises(ResumePointError, match="the manifest names checkpoint"):
        NNCheckpoint.verify(run.id, "last", root=root)
    refused_everywhere(root, run.id, batches, "torn")


# -- 5. the compatibility copy and orphans ----------------------------------------------
def test_a_save_killed_before_its_publish_leaves_the_compatibility_copy_on_the_live_point(
        tmp_path, monkeypatch):
    import nnx._persistence.resume_point as resume_point

    root = tmp_path / "runs"
    run, _ = trained(root)
    ckdir = run.checkpoints_dir
    live = NNCheckpoint.load(run.id, "last", root=root)
    write = resume_point.atomic_write_bytes

    class Died(BaseException):
        pass

    def dying(target, data, **kwargs):  # a SIGKILL once the staged manifest is in place
        out = write(target, data, **kwargs)
        if Path(target).name.endswith(".staged"):
            raise Died
        return out

    monkeypatch.setattr(resume_point, "atomic_write_bytes", dying)
    with pytest.raises(Died):
        live.save(ckdir / "last.pt", training_state={"epoch": 9})
    monkeypatch.setattr(resume_point, "atomic_write_bytes", write)
    point = NNCheckpoint.verify(run.id, "last", root=root)
    assert point is not None and (point.generation, point.staged) == (2, False)
    assert (ckdir / "last.pt.opt.pt").read_bytes() == (ckdir / point.sidecar).read_bytes()


def test_orphans_are_reported_removed_by_repair_and_by_the_next_save(tmp_path):
    root = tmp_path / "runs"
    run, _ = trained(root)
    ckdir = run.checkpoints_dir
    strays = ["last.pt.opt.1.pt", ".last.pt.opt.pt.0badf00d"]
    for name in strays:
        shutil.copy(ckdir / "last.pt.opt.2.pt", ckdir / name)
    assert NNCheckpoint.verify(run.id, "last", root=root) is not None  # still a whole point
    code, out = cli("runs", "verify", run.id, "--root", str(root))
    assert code == 0, out
    assert f"warn last  orphan files {', '.join(sorted(strays))}" in out
    assert all(name in files(ckdir) for name in strays)  # verification removes nothing
    code, out = cli("runs", "verify", run.id, "--root", str(root), "--repair")
    assert code == 0 and f"repaired last  removed {', '.join(sorted(strays))}" in out, out
    assert not any((ckdir / name).exists() for name in strays)
    assert "warn" not in cli("runs", "verify", run.id, "--root", str(root))[1]
    # The next save removes them too.
    for name in strays:
        shutil.copy(ckdir / "last.pt.opt.2.pt", ckdir / name)
    NNCheckpoint.load(run.id, "last", root=root).save(ckdir / "last.pt",
                                                      training_state={"epoch": 1})
    names = {p.name for p in ckdir.iterdir()}
    assert not names & {*strays, "last.pt.opt.2.pt"} and "last.pt.opt.3.pt" in names
    assert (ckdir / "last.pt.opt.pt").read_bytes() == (ckdir / "last.pt.opt.3.pt").read_bytes()


def test_repair_leaves_a_point_that_fails_as_it_is(tmp_path):
    root = tmp_path / "runs"
    run, _ = trained(root)
    ckdir = run.checkpoints_dir
    shutil.copy(ckdir / "last.pt.opt.2.pt", ckdir / "last.pt.opt.1.pt")
    (ckdir / "last.pt.opt.2.pt").unlink()
    before = files(ckdir)
    code, out = cli("runs", "verify", run.id, "--root", str(root), "--repair")
    assert code == 1 and "FAIL last  torn:" in out
    assert files(ckdir) == before


# -- 6. safetensors points ---------------------------------------------------------------
def test_a_safetensors_snapshot_verifies_from_the_command_line(tmp_path):
    root = tmp_path / "runs"
    run, _ = trained(root, callbacks=[ModelCheckpoint(format="safetensors")])
    code, out = cli("runs", "verify", run.id, "--root", str(root))
    assert code == 0, out
    assert "ok  custom_e0.safetensors  generation 1  epoch 0" in out.splitlines()
    assert "ok  custom_e1.safetensors  generation 1  epoch 1" in out.splitlines()
    for tag in ("custom_e1", "custom_e1.safetensors"):
        point = NNCheckpoint.verify(run.id, tag, root=root)
        assert point is not None and point.position["completed_epoch"] == 1
    # A damaged snapshot is reported under the same name.
    path = run.checkpoints_dir / "custom_e1.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    code, out = cli("runs", "verify", run.id, "--root", str(root))
    assert code == 1 and "FAIL custom_e1.safetensors  corrupted:" in out, out
