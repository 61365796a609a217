"""NNModel's inference helpers after training (spec §3.1, §13.2): every submodule's mode
restored, predict_proba, and BEST reloaded to evaluate as at its epoch."""

from __future__ import annotations

import warnings

import pytest
import torch
from _nnx_core_tiny import sgd
from _support.training_loop import chunks, data, make_model

from nnx import (
    NNCheckpoint,
    NNEvaluationDataPoint,
    NNModel,
    NNTrainParams,
    ProbabilitySpec,
    TaskSpec,
)

# -- NNModel inference helpers -------------------------------------------------------------


def _modes(model: NNModel) -> list[tuple[str, bool]]:
    return [(name, module.training) for name, module in model.net.named_modules()]


def test_predict_and_evaluate_after_training_restore_every_submodule_mode(tmp_path):
    x, y = data(16)
    model = make_model(dropout=0.5)
    model.train(NNTrainParams(n_epochs=1, train_loader=chunks(x, y, [8, 8]), optim=sgd(),
                              scheduler=None), root=tmp_path / "runs", verbose=False)
    model.net.train()
    model.net.dropouts[0].eval()  # a mixed tree: root training, one Dropout frozen in eval
    before = _modes(model)
    assert before[0] == ("", True) and ("dropouts.0", False) in before

    first = model.predict(x).logits
    assert _modes(model) == before
    assert torch.equal(model.predict(x).logits, first)  # eval mode inside: no dropout noise
    model.evaluate(chunks(x, y, [8, 8]))
    assert _modes(model) == before
    model.predict_proba(x, ProbabilitySpec("categorical"))
    assert _modes(model) == before
    with pytest.raises(ValueError):
        model.predict(torch.randn(3, 5))  # wrong width: the body raises
    assert _modes(model) == before


def test_predict_proba_of_a_categorical_task_sums_to_one():
    model = make_model(task=TaskSpec.categorical(3))
    x, _ = data(7)
    result = model.predict_proba(x)
    assert result.probabilities is not None
    torch.testing.assert_close(result.probabilities.sum(dim=1), torch.ones(7))
    torch.testing.assert_close(result.probabilities,
                               torch.softmax(model.predict(x).logits, dim=1))
    assert result.class_indices.tolist() == model.predict(x).classes.tolist()


def test_predict_proba_over_a_shuffling_loader_warns_and_a_sequential_one_does_not():
    # §3.1: an ordinary loader's sample ids are iteration positions; a shuffling loader warns.
    from torch.utils.data import BatchSampler, DataLoader, RandomSampler, TensorDataset

    model = make_model(task=TaskSpec.categorical(3))
    x, y = data(10)
    dataset = TensorDataset(x, y)
    shuffled = DataLoader(dataset, batch_size=4, shuffle=True,
                          generator=torch.Generator().manual_seed(0))
    assert isinstance(shuffled.sampler, RandomSampler)
    with pytest.warns(RuntimeWarning, match=r"predict_proba: the DataLoader shuffles "
                                            r"\(RandomSampler\), so sample_ids are iteration"):
        result = model.predict_proba(shuffled)
    assert result.sample_ids.tolist() == list(range(10))  # positions, as the warning says
    batched = DataLoader(dataset, batch_sampler=BatchSampler(
        RandomSampler(dataset), batch_size=4, drop_last=False))
    with pytest.warns(RuntimeWarning, match=r"shuffles \(RandomSampler\)"):
        model.predict_proba(batched)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning at all for these
        ordered = model.predict_proba(DataLoader(dataset, batch_size=4))
        model.predict_proba(x)
        model.predict_proba(chunks(x, y, [4, 6]))
    assert ordered.sample_ids.tolist() == list(range(10))
    torch.testing.assert_close(ordered.logits, model.predict(x).logits)


def test_from_checkpoint_best_reproduces_evaluate_at_that_epoch(tmp_path):
    x, y = data(24, seed=4)
    train, val = chunks(x[:16], y[:16], [8, 8]), chunks(x[16:], y[16:], [8])
    errors = [0.5, 0.1, 0.3, 0.4]  # BEST is epoch 1, not the last epoch

    def evaluate(ctx):
        record = ctx.model.evaluate(ctx.val_loader)
        return NNEvaluationDataPoint(loss=record.loss, error=errors[ctx.epoch_idx],
                                     accuracy=record.accuracy)

    model = make_model()
    run = model.train(NNTrainParams(n_epochs=4, train_loader=train, val_loader=val,
                                    optim=sgd(0.5), scheduler=None),
                      eval_step_fn=evaluate, root=tmp_path / "runs", verbose=False)
    best_path = tmp_path / "runs" / run.id / "checkpoints" / "best.pt"
    assert NNCheckpoint.from_file(best_path).epoch == 1
    restored = NNModel.from_checkpoint(best_path)
    at_best = run.epoch_records()[1].val_edp
    again = restored.evaluate(val)
    assert again.loss == pytest.approx(at_best.loss, rel=1e-6)
    assert again.accuracy == at_best.accuracy
    assert model.evaluate(val).loss != pytest.approx(at_best.loss, rel=1e-6)  # weights moved on
