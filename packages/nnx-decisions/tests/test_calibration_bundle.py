"""A TemperatureCalibrator riding in a run bundle (spec §18 model ids, §22 calibrators):
exported beside the weights it is bound to, read back as a calibrator, identical
calibrated probabilities; one bound to other weights is refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import NNModel, NNModelParams, NNOptimParams, NNParams, NNTrainParams, TaskSpec
from nnx.bundles import (
    BundleExportError,
    export_bundle,
    reconstruct_bundle,
    validate_bundle,
)
from nnx.calibration import TemperatureCalibrator, fit_temperature, model_fingerprint

LABELS = ["cat", "dog", "fox"]
SPLITS = {"split_id": "calibration", "train_split_id": "train", "test_split_id": "test"}


def _model(seed: int = 0) -> NNModel:
    torch.manual_seed(seed)
    return NNModel(net_params=NNParams(input_dim=4, output_dim=3, hidden_dims=(8,)),
                   params=NNModelParams(task=TaskSpec.categorical(3)))


def _data(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=g)
    return x, (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    model = _model()
    x, y = _data(64, seed=1)
    params = NNTrainParams(n_epochs=2, seed=0, optim=NNOptimParams.builder().sgd(max_lr=0.5)
                           .build(), train_loader=DataLoader(TensorDataset(x, y), batch_size=16))
    run = model.train(params, verbose=False, root=root)
    x_cal, y_cal = _data(200, seed=2)
    logits = model.predict(x_cal).logits.numpy()
    calibrator = fit_temperature(logits, y_cal.numpy(), LABELS,
                                 model_id=model_fingerprint(model), **SPLITS).require()
    return root, run, model, calibrator


def test_a_bundled_calibrator_comes_back_and_calibrates_identically(trained, tmp_path):
    root, run, model, calibrator = trained
    assert calibrator.num_classes == 3 and calibrator.model_id.startswith("sha256:")
    export_bundle(run.id, tmp_path / "bundle", calibrators=[calibrator], labels=LABELS,
                  root=root)
    info = validate_bundle(tmp_path / "bundle")  # the fingerprint checked from the bytes
    assert len(info.calibrators) == 1
    rebuilt = reconstruct_bundle(tmp_path / "bundle")
    (back,) = rebuilt.calibrators
    assert isinstance(back, TemperatureCalibrator) and back == calibrator
    assert back.temperature == calibrator.temperature  # float64-exact through the bundle
    x_test, _ = _data(50, seed=3)
    source = calibrator.transform(model.predict(x_test).logits.numpy(), labels=LABELS,
                                  model_id=model_fingerprint(model))
    served = back.transform(rebuilt.model.predict(x_test).logits.numpy(), labels=LABELS,
                            model_id=model_fingerprint(rebuilt.model))
    np.testing.assert_array_equal(served.calibrated_probabilities,
                                  source.calibrated_probabilities)
    assert served.calibrator_id == source.calibrator_id


def test_a_calibrator_bound_to_other_weights_is_refused(trained, tmp_path):
    root, run, _, calibrator = trained
    other = TemperatureCalibrator.from_json(calibrator.to_json().replace(
        calibrator.model_id, model_fingerprint(_model(seed=5))))
    with pytest.raises(BundleExportError, match="bound to model"):
        export_bundle(run.id, tmp_path / "bundle", calibrators=[other], labels=LABELS,
                      root=root)
    assert not (tmp_path / "bundle").exists()
