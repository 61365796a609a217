"""ModelCheckpoint (spec §5, §4.2): weights-only files, safetensors refusals for runtime
modules, and tags that never collide with the run's files."""

from __future__ import annotations

import pytest
import torch
from _support.callbacks import loader, make_model, params

from nnx import (
    Callback,
    Checkpoints,
    Devices,
    ModelCheckpoint,
    NNCheckpoint,
    NNModel,
    NNModelParams,
    NNOptimParams,
)
from nnx._persistence.checkpoint import sidecar_path

# -- ModelCheckpoint ------------------------------------------------------------------------------


def test_model_checkpoint_files_are_weights_only(tmp_path):
    root = tmp_path / "runs"
    saver = ModelCheckpoint(every_n_epochs=2)
    model = make_model()
    run = model.train(params(4), callbacks=[saver], root=root, verbose=False)
    assert saver.saved == ["custom_e1", "custom_e3"]
    for tag in saver.saved:
        path = root / run.id / "checkpoints" / f"{tag}.pt"
        checkpoint = NNCheckpoint.from_file(path)
        assert checkpoint.training_state_present is False
        assert checkpoint.training_state() is None
        assert not sidecar_path(path).exists()
    e3 = NNCheckpoint.from_file(root / run.id / "checkpoints" / "custom_e3.pt")
    assert e3.epoch == 3
    for key, value in model.net.state_dict().items():
        assert torch.equal(e3.state_dict[key], value)
    assert NNModel.from_checkpoint(e3).predict(loader(1)[0][0]).logits.shape == (4, 3)
    last = NNCheckpoint.load(run.id, Checkpoints.LAST, root=root)
    assert last.training_state_present is True  # in contrast: LAST carries training state
    with pytest.raises(ValueError):
        ModelCheckpoint(every_n_epochs=0)
    with pytest.raises(ValueError):
        ModelCheckpoint(prefix="../x")


def _runtime_model() -> NNModel:
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    return NNModel(module=module, params=NNModelParams(device=Devices.CPU))


def test_a_safetensors_model_checkpoint_refuses_a_runtime_module_in_its_check():
    # §3.2: a portable save of a runtime module fails before any file or directory exists.
    from nnx import MissingModelFactoryError

    portable = ModelCheckpoint(format="safetensors")
    with pytest.raises(MissingModelFactoryError, match=(
            r"^ModelCheckpoint\(format='safetensors'\): a safetensors checkpoint is a portable "
            r"save, but this model wraps a runtime module \(torch\.nn\.modules\.container\."
            r"Sequential, reconstructible=False\)")):
        portable.check_model(_runtime_model())
    portable.check_model(make_model())  # a built-in net can be rebuilt
    ModelCheckpoint().check_model(_runtime_model())  # a pickle file is not a portable save
    Callback().check_model(_runtime_model())  # the base hook refuses nothing


@pytest.mark.parametrize("loop", ["model", "trainer"])
def test_a_runtime_modules_safetensors_model_checkpoint_is_refused_before_any_run_dir(
        tmp_path, loop):
    from nnx import MissingModelFactoryError, NNTrainerParams, Trainer, supervised_objective

    model = _runtime_model()
    before = {k: v.clone() for k, v in model.net.state_dict().items()}
    callbacks = [ModelCheckpoint(format="safetensors")]
    with pytest.raises(MissingModelFactoryError, match="portable save"):
        if loop == "model":
            model.train(params(1), callbacks=callbacks, root=tmp_path / "runs", verbose=False)
        else:
            trainer_params = (NNTrainerParams.builder().n_epochs(1).train_loader(loader())
                              .optimizer("net", NNOptimParams()).build())
            Trainer(model).train(trainer_params, objective=supervised_objective(),
                                 callbacks=callbacks, root=tmp_path / "runs", verbose=False)
    assert not (tmp_path / "runs").exists()
    assert all(torch.equal(v, before[k]) for k, v in model.net.state_dict().items())


def test_model_checkpoint_tags_do_not_collide_with_the_run_files(tmp_path):
    run = make_model().train(params(2), callbacks=[ModelCheckpoint()], root=tmp_path / "runs",
                             verbose=False)
    names = {p.name for p in (tmp_path / "runs" / run.id / "checkpoints").iterdir()}
    assert {"custom_e0.pt", "custom_e1.pt", "last.pt", "best.pt"} <= names
