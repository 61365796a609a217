"""The first-day mistakes get a specific message, raised before anything changes: an
unbatched sample to predict, a tensor or a dataset where a loader goes, class labels for a
regression loss, a run id where a checkpoint file goes, a zero group rate, a scheduler keyed
by no optimizer, an empty training loader (spec §2.3, §3.1, §4, §13.2)."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from _nnx_core_tiny import sgd, tiny_batches
from torch.utils.data import DataLoader, TensorDataset

from nnx import (
    Losses,
    NNCheckpoint,
    NNDataset,
    NNModel,
    NNModelParams,
    NNOptimParams,
    NNParamGroupSpec,
    NNParams,
    NNSchedulerParams,
    NNTrainerParams,
    NNTrainParams,
    TaskValidationError,
)


@pytest.fixture(autouse=True)
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # runs/ lands in a scratch directory
    return tmp_path


def eight_features(loss=Losses.CROSS_ENTROPY) -> NNModel:
    torch.manual_seed(0)
    return NNModel(net_params=NNParams(input_dim=8, output_dim=3, hidden_dims=(4,),
                                       dropout_prob=0.5),
                   params=NNModelParams(loss=loss))


def weights(model):
    return {k: v.clone() for k, v in model.net.state_dict().items()}


def same(a, b):
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def data():
    g = torch.Generator().manual_seed(0)
    return torch.randn(20, 8, generator=g), torch.randint(0, 3, (20,), generator=g)


def test_predict_refuses_one_unbatched_sample_and_leaves_the_model_as_it_was():
    model = eight_features()
    model.net.train()
    before = weights(model)
    with pytest.raises(ValueError, match=re.escape(
            "predict got one unbatched sample of 8 features (shape (8,)); the net takes a "
            "batch of rows (N, 8): pass x.unsqueeze(0)")):
        model.predict(torch.randn(8))
    with pytest.raises(ValueError, match="one unbatched sample of 8 features"):
        model.predict(torch.randn(8).numpy())
    assert model.net.training and same(weights(model), before)
    assert model.predict(torch.randn(8).unsqueeze(0)).logits.shape == (1, 3)
    # A net of one feature per row still reads a 1-D input as that many rows.
    torch.manual_seed(0)
    narrow = NNModel(net_params=NNParams(input_dim=1, output_dim=2, hidden_dims=(3,)))
    assert narrow.predict(torch.randn(5)).logits.shape == (5, 2)


@pytest.mark.parametrize("make", [lambda x: x, lambda x: x.numpy()], ids=["tensor", "array"])
def test_a_tensor_as_a_loader_says_loaders_yield_batches(make, in_tmp):
    x, _ = data()
    kind = "torch.Tensor" if isinstance(make(x), torch.Tensor) else "numpy.ndarray"
    expected = re.escape(f"got a {kind} of shape (20, 8), not a loader: a loader yields "
                         "(X, y) batches. Use NNDataset(X, y).train_loader, or "
                         "DataLoader(TensorDataset(X, y), batch_size=...)")
    with pytest.raises(TypeError, match="NNTrainParams.train_loader " + expected):
        NNTrainParams(n_epochs=1, train_loader=make(x), optim=sgd())
    with pytest.raises(TypeError, match="NNTrainParams.val_loader " + expected):
        NNTrainParams(n_epochs=1, train_loader=tiny_batches(), val_loader=make(x))
    with pytest.raises(TypeError, match="NNTrainerParams.train_loader " + expected):
        NNTrainerParams(optims={"G": NNOptimParams()}, train_loader=make(x))
    model = eight_features()
    with pytest.raises(TypeError, match="evaluate " + expected):
        model.evaluate(make(x))
    assert list(in_tmp.iterdir()) == []  # nothing reserved or written


def test_a_dataset_as_a_loader_names_its_loaders(in_tmp):
    dataset = NNDataset(*data(), val_proportion=0.2, seed=0)
    with pytest.raises(TypeError, match=re.escape(
            "NNTrainParams.train_loader got the dataset NNDataset, not a loader: pass one of "
            "its loaders, here data.train_loader")):
        NNTrainParams(n_epochs=1, train_loader=dataset)
    with pytest.raises(TypeError, match=r"NNTrainParams.val_loader .* here data\.val_loader"):
        NNTrainParams(n_epochs=1, train_loader=dataset.train_loader, val_loader=dataset)
    model = eight_features()
    with pytest.raises(TypeError, match=r"^evaluate got the dataset NNDataset.*data\.val_loader"):
        model.evaluate(dataset)
    with pytest.raises(TypeError, match=r"^predict got the dataset NNDataset.*data\.test_loader"):
        model.predict(dataset)
    assert list(in_tmp.iterdir()) == []
    # Its loaders themselves are what the loop takes.
    NNTrainParams(n_epochs=1, train_loader=dataset.train_loader, val_loader=dataset.val_loader)


def test_a_regression_loss_on_class_labels_is_refused_on_the_first_batch(in_tmp):
    model = eight_features(loss=Losses.MEAN_SQUARED_ERROR)
    before = weights(model)
    x, y = data()
    params = NNTrainParams(n_epochs=2, train_loader=[(x[:4], y[:4]), (x[4:8], y[4:8])],
                           scheduler=None, optim=sgd())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(TaskValidationError, match=re.escape(
                "MSELoss (a regression loss; the model declares no task) got torch.int64 "
                "labels of shape (4,) for an output of shape (4, 3): for regression pass float "
                "targets of the output's shape (4, 3) (and declare TaskSpec.regression(3)); "
                "for class labels train with Losses.CROSS_ENTROPY")):
            model.train(params, verbose=False)
    assert not [w for w in caught if "broadcasting" in str(w.message)]  # torch never ran
    assert same(weights(model), before)  # refused before any update
    assert not list((in_tmp / "runs").rglob("*.pt"))  # nothing committed
    # Float targets, and integer ones of the output's shape (counts), train as before.
    for salt, targets in (("floats", torch.randn(8, 3)), ("counts", torch.randint(0, 5, (8, 3)))):
        model.train(NNTrainParams(n_epochs=1, train_loader=[(x[:8], targets)], scheduler=None,
                                  optim=sgd()), verbose=False, salt=salt)


def test_from_checkpoint_of_a_run_id_or_a_missing_tag_names_the_run_and_what_it_has(in_tmp):
    model = eight_features()
    x, y = data()
    run = model.train(NNTrainParams(n_epochs=1, train_loader=[(x, y)], scheduler=None,
                                    optim=sgd()), verbose=False)
    before = sorted(in_tmp.rglob("*"))
    with pytest.raises(FileNotFoundError, match=re.escape(
            f"{run.id!r} is a run id, not a checkpoint file; name one of its checkpoints, "
            f"e.g. runs/{run.id}/checkpoints/best.pt or NNCheckpoint.load({run.id!r}, 'best') "
            "(it has best, first, last)")):
        NNModel.from_checkpoint(run.id)
    with pytest.raises(FileNotFoundError, match=re.escape(
            f"run {run.id} under runs/ has no 'q1' checkpoint (runs/{run.id}/checkpoints/"
            "q1.pt); it has best, first, last")):
        NNModel.from_checkpoint(f"runs/{run.id}/checkpoints/q1.pt")
    with pytest.raises(FileNotFoundError, match=f"run {run.id} under runs/ has no 'q2' "
                                                "checkpoint .*; it has best, first, last"):
        NNCheckpoint.load(run.id, "q2")
    with pytest.raises(FileNotFoundError, match=re.escape(f"no run {'0' * 32!r} under runs/")):
        NNCheckpoint.load("0" * 32, "last")
    with pytest.raises(FileNotFoundError, match=re.escape(f"no run {'0' * 32!r} under runs/")):
        NNModel.from_checkpoint("0" * 32)
    assert sorted(in_tmp.rglob("*")) == before  # nothing created


@pytest.mark.parametrize("field", ["lr", "lr_multiplier"])
def test_a_zero_group_rate_says_the_domain_and_to_freeze_instead(field):
    with pytest.raises(ValueError) as caught:
        NNParamGroupSpec(name_pattern="encoder.*", **{field: 0})
    message = str(caught.value)
    assert message.startswith(f"NNParamGroupSpec.{field} must be > 0; got 0 (None means the "
                              "optimizer's max_lr")
    assert message.endswith("; to keep a group from training, freeze it with "
                            "nnx.finetune.freeze (model.freeze(pattern)) rather than give it "
                            "a zero rate")
    assert "None means freeze" not in message


def test_a_scheduler_keyed_by_no_optimizer_is_one_grammatical_sentence():
    plateau = NNSchedulerParams()
    with pytest.raises(ValueError, match=re.escape(
            "NNTrainerParams.schedulers: scheduler 'D' names no optimizer; the optimizer is "
            "'G'. Key each scheduler by its optimizer's name")):
        NNTrainerParams(optims={"G": NNOptimParams()}, schedulers={"D": plateau})
    with pytest.raises(ValueError, match=re.escape(
            "schedulers 'D', 'E' name no optimizer; the optimizers are 'G', 'H'.")):
        NNTrainerParams(optims={"G": NNOptimParams(), "H": NNOptimParams()},
                        schedulers={"D": plateau, "E": plateau})


@pytest.mark.parametrize("clock", ["epoch", "optimizer_update"])
def test_an_empty_training_loader_is_refused_before_any_run_is_reserved(clock, in_tmp):
    one_cycle = NNSchedulerParams.builder().one_cycle().clock(clock).build()
    empty = DataLoader(TensorDataset(torch.zeros(0, 8), torch.zeros(0, dtype=torch.long)),
                       batch_size=4)
    expected = ("NNTrainParams.train_loader is empty (len 0): training needs at least one "
                "batch per epoch, and a one-cycle or warm-up schedule over it would plan 0 "
                "steps")
    for loader in ([], empty):
        with pytest.raises(ValueError, match=re.escape(expected)):
            NNTrainParams(n_epochs=2, train_loader=loader, scheduler=one_cycle, optim=sgd())
    params = NNTrainParams(n_epochs=2, train_loader=tiny_batches(), scheduler=one_cycle)
    with pytest.raises(ValueError, match=re.escape(expected)):
        params.with_train_loader([])
    with pytest.raises(ValueError, match=r"NNTrainerParams.train_loader is empty \(len 0\)"):
        NNTrainerParams(optims={"G": NNOptimParams()}, train_loader=[])
    assert list(in_tmp.iterdir()) == []  # no run reserved
