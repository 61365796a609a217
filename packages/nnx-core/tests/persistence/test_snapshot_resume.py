"""Resume from a ModelCheckpoint snapshot (issue 11, spec §14.2): a tag names the
``.pt`` or ``.safetensors`` file ModelCheckpoint wrote, spelled with or without its
suffix. A snapshot holds weights only: "auto" resumes its weights with a warning, and
"stateful" refuses before anything is restored or reserved."""

from __future__ import annotations

import pytest
import torch

from nnx import ModelCheckpoint, NNCheckpoint, NNModel, NNParams, NNTrainParams, ResumePointError


def _batches():
    torch.manual_seed(0)
    return [(torch.randn(6, 3), torch.randint(0, 2, (6,))) for _ in range(2)]


def _model(seed: int) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=3, output_dim=2, hidden_dims=(4,)))


def _source(root, fmt: str):
    batches = _batches()
    run = _model(0).train(NNTrainParams(n_epochs=2, train_loader=batches),
                          callbacks=[ModelCheckpoint(prefix="snap", format=fmt)],
                          verbose=False, root=root)
    return run, batches


def _resume(root, run, batches, tag: str, mode: str = "auto", n_epochs: int = 1):
    model = _model(7)
    params = NNTrainParams(n_epochs=n_epochs, train_loader=batches, resume_from_run_id=run.id,
                           resume_from_checkpoint=tag, resume_mode=mode)
    return model, model.train(params, verbose=False, root=root)


@pytest.mark.parametrize(("fmt", "tags"), [
    ("safetensors", ["snap_e0", "snap_e0.safetensors"]),
    ("pickle", ["snap_e0"]),
])
def test_auto_resumes_a_snapshots_weights(tmp_path, fmt, tags):
    run, batches = _source(tmp_path, fmt)
    snapshot = NNCheckpoint.load(run.id, "snap_e0", root=tmp_path)
    assert snapshot.path.suffix == (".safetensors" if fmt == "safetensors" else ".pt")
    for tag in tags:
        captured = {}  # the weights the resumed run starts its first epoch from
        model = _model(7)
        original = model.net.load_state_dict

        def spy(state, *args, captured=captured, original=original, **kwargs):
            captured.update({k: v.clone() for k, v in state.items()})
            return original(state, *args, **kwargs)

        model.net.load_state_dict = spy  # type: ignore[method-assign]
        params = NNTrainParams(n_epochs=1, train_loader=batches, resume_from_run_id=run.id,
                               resume_from_checkpoint=tag)
        with pytest.warns(RuntimeWarning, match="holds weights only"):
            resumed = model.train(params, verbose=False, root=tmp_path)
        status = resumed.resume_status
        assert (status.mode, status.source_checkpoint, status.source_epoch) == (
            "weights_only", tag, 0)
        assert [r.epoch for r in resumed.epoch_records()] == [1]
        assert captured.keys() == snapshot.state_dict.keys()
        assert all(torch.equal(captured[k], v) for k, v in snapshot.state_dict.items())


@pytest.mark.parametrize("fmt", ["safetensors", "pickle"])
def test_stateful_refuses_a_snapshot_before_anything_is_restored(tmp_path, fmt):
    run, batches = _source(tmp_path, fmt)
    runs_before = sorted(p.name for p in tmp_path.iterdir())
    model = _model(7)
    weights = {k: v.clone() for k, v in model.net.state_dict().items()}
    rng = torch.get_rng_state()
    params = NNTrainParams(n_epochs=1, train_loader=batches, resume_from_run_id=run.id,
                           resume_from_checkpoint="snap_e1", resume_mode="stateful")
    with pytest.raises(ValueError, match=r"resume_mode='stateful' needs training state, but "
                       r"'snap_e1' of run \w+ holds weights only"):
        model.train(params, verbose=False, root=tmp_path)
    assert all(torch.equal(model.net.state_dict()[k], v) for k, v in weights.items())
    assert torch.equal(torch.get_rng_state(), rng)
    assert sorted(p.name for p in tmp_path.iterdir()) == runs_before  # nothing reserved


def test_a_damaged_safetensors_snapshot_is_refused_before_anything_is_reserved(tmp_path):
    run, batches = _source(tmp_path, "safetensors")
    path = run.checkpoints_dir / "snap_e1.safetensors"
    data = bytearray(path.read_bytes())
    data[-3] ^= 0x01  # inside the last tensor's bytes
    path.write_bytes(bytes(data))
    runs_before = sorted(p.name for p in tmp_path.iterdir())
    with pytest.raises(ResumePointError, match="corrupted"):
        _resume(tmp_path, run, batches, "snap_e1")
    assert sorted(p.name for p in tmp_path.iterdir()) == runs_before


def test_an_unknown_snapshot_tag_names_what_was_looked_for(tmp_path):
    run, batches = _source(tmp_path, "safetensors")
    with pytest.raises(FileNotFoundError, match=r"has no 'snap_e9' checkpoint .*snap_e9\.pt"):
        _resume(tmp_path, run, batches, "snap_e9")
