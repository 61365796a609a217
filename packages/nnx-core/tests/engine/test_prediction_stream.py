"""NNModel.iter_predict (spec §21): one batch at a time, equal to the eager calls."""

from __future__ import annotations

import gc
import tracemalloc
import warnings

import numpy as np
import pytest
import torch
from _nnx_core_tiny import tiny_loader, tiny_model, weights
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from nnx import Losses, TaskSpec
from nnx._engine.prediction import PredictionResult, PredictResult, ProbabilitySpec
from nnx.streaming import (
    PredictionBatch,
    PredictionStream,
    StreamClosedError,
    concatenate_predictions,
)


def _collect(model, loader, **kwargs):
    with model.iter_predict(loader, **kwargs) as stream:
        return list(stream)


def test_concatenated_stream_equals_eager_predict():
    model, loader = tiny_model(), tiny_loader(3, 5)
    batches = _collect(model, loader)
    assert [type(b) for b in batches] == [PredictionBatch] * 3
    joined = concatenate_predictions(batches)
    eager = model.predict(loader)
    assert isinstance(joined, PredictResult)
    assert torch.equal(joined.logits, eager.logits)
    assert torch.equal(joined.classes, eager.classes)
    ids = np.concatenate([b.sample_ids for b in batches])
    assert ids.tolist() == list(range(15))


@pytest.mark.parametrize("task", [TaskSpec.categorical(3), TaskSpec.multilabel(3, threshold=0.3)])
def test_concatenated_rich_stream_equals_eager_predict_proba(task):
    loss = Losses.CROSS_ENTROPY if task.kind == "categorical" else Losses.BINARY_CROSS_ENTROPY
    model = tiny_model(task=task, loss=loss)
    loader = [(x, y if task.kind == "categorical" else nn.functional.one_hot(y, 3).float())
              for x, y in tiny_loader(3, 5)]
    joined = concatenate_predictions(_collect(model, loader, rich=True))
    eager = model.predict_proba(loader)
    assert isinstance(joined, PredictionResult)
    assert joined.spec == eager.spec
    assert torch.equal(joined.logits, eager.logits)
    assert torch.equal(joined.probabilities, eager.probabilities)
    assert torch.equal(joined.decoded, eager.decoded)
    assert joined.sample_ids.tolist() == eager.sample_ids.tolist()
    # And plain predict decodes with the task's threshold on both routes.
    assert torch.equal(concatenate_predictions(_collect(model, loader)).classes,
                       model.predict(loader).classes)


def test_a_given_spec_matches_predict_proba_with_it():
    model, loader = tiny_model(), tiny_loader(2, 4)
    spec = ProbabilitySpec("categorical", labels=("a", "b", "c"))
    joined = concatenate_predictions(_collect(model, loader, spec=spec))
    eager = model.predict_proba(loader, spec)
    assert joined.decoded.tolist() == eager.decoded.tolist()
    assert torch.equal(joined.probabilities, eager.probabilities)


def test_empty_loader_yields_nothing_where_eager_raises():
    model = tiny_model()
    assert _collect(model, []) == []
    with pytest.raises(ValueError, match="no input rows"):
        model.predict([])
    with pytest.raises(ValueError, match="no batches"):
        concatenate_predictions([])


def test_shuffling_loader_warns_at_the_first_batch_only():
    model = tiny_model()
    x, y = torch.randn(12, 4), torch.zeros(12, dtype=torch.long)
    loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _collect(model, loader)
    assert [str(w.message).startswith("iter_predict: the DataLoader shuffles")
            for w in caught] == [True]


def test_each_forward_runs_in_eval_mode_and_the_mode_is_restored_between_batches():
    model = tiny_model(dropout=0.5)
    model.net.train()
    seen = []
    model.net.register_forward_hook(lambda m, i, o: seen.append((m.training,
                                                                 torch.is_grad_enabled())))
    with model.iter_predict(tiny_loader(3, 2)) as stream:
        for _ in stream:
            assert model.net.training  # its own mode while the consumer runs
    assert seen == [(False, False)] * 3


def test_a_failed_forward_restores_the_mode_and_closes_the_stream():
    model = tiny_model()
    model.net.train()
    bad = [(torch.randn(2, 4), torch.zeros(2)), (torch.randn(2, 7), torch.zeros(2))]
    stream = model.iter_predict(bad)
    with pytest.raises(ValueError, match="expects 4 features"), stream:
        for _ in stream:
            pass
    assert model.net.training and all(m.training for m in model.net.modules())
    assert stream.closed


def test_reuse_after_consume_break_or_close_raises_and_close_ends_a_loop():
    model, loader = tiny_model(), tiny_loader(3, 2)
    stream = model.iter_predict(loader)
    with stream:
        assert len(list(stream)) == 3
    with pytest.raises(StreamClosedError):
        iter(stream)
    with pytest.raises(StreamClosedError):
        stream.__enter__()
    broken = model.iter_predict(loader)
    for _ in broken:
        break
    with pytest.raises(StreamClosedError):
        iter(broken)
    closing = model.iter_predict(loader)
    got = []
    for batch in closing:
        got.append(batch)
        closing.close()
    assert len(got) == 1 and closing._model is None and closing._gen is None
    assert len(list(model.iter_predict(loader))) == 3  # the loader is the caller's still


def test_in_memory_inputs_and_bad_arguments_are_refused_with_nothing_touched():
    model = tiny_model()
    model.net.train()
    before = weights(model)
    for data in (torch.randn(3, 4), np.zeros((3, 4), np.float32), {"x": torch.randn(3, 4)},
                 (torch.randn(3, 4),)):
        with pytest.raises(TypeError):
            model.iter_predict(data)
    with pytest.raises(ValueError, match="needs a ProbabilitySpec"):
        model.iter_predict(tiny_loader(), rich=True)
    with pytest.raises(TypeError):
        model.iter_predict(tiny_loader(), spec="categorical")
    assert model.net.training
    assert all(torch.equal(before[k], v) for k, v in weights(model).items())


class _Rows:
    """A loader of N synthetic rows in batches made on demand, so the data itself
    holds no memory; it can be iterated again, as a DataLoader can."""

    def __init__(self, n, size=10_000):
        self.n, self.size = n, size

    def __iter__(self):
        for start in range(0, self.n, self.size):
            rows = min(self.size, self.n - start)
            yield torch.full((rows, 4), float(start % 7)), torch.zeros(rows, dtype=torch.long)


def _peak(model, n, *, keep_batches=False):
    loader = _Rows(n)
    kept = []
    gc.collect()
    tracemalloc.start()
    with model.iter_predict(loader) as stream:
        for batch in stream:
            # keep the batch (what not to do), or only a decision from it
            kept.append(batch if keep_batches else int(batch.classes.sum()))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak


def test_peak_memory_of_a_stream_does_not_grow_with_the_dataset():
    model = tiny_model(hidden=2)
    _peak(model, 10_000)  # warm-up: first-call allocations
    small, large = _peak(model, 50_000), _peak(model, 200_000)
    assert large < small * 1.5 + 64_000  # one batch in flight, whatever N
    # The measure can see growth: a consumer that keeps every batch holds O(N)
    # (here its sample ids, which tracemalloc traces).
    kept_small, kept_large = (_peak(model, n, keep_batches=True) for n in (50_000, 200_000))
    assert kept_large > kept_small * 2.5


def test_stream_type_is_exported_and_documented():
    stream = tiny_model().iter_predict(tiny_loader())
    assert isinstance(stream, PredictionStream)
    stream.close()


def test_continuous_decoding_and_each_rich_batch_equal_the_eager_calls():
    """§21: continuous decoding is the eager one, and each batch is the PredictionResult
    predict_proba() builds for that batch alone (its ids offset by the rows before it)."""
    model = tiny_model(task=TaskSpec.regression(2), loss=Losses.MEAN_SQUARED_ERROR, out=2)
    loader = [(x, torch.randn(len(x), 2)) for x, _ in tiny_loader(3, 5)]
    batches = _collect(model, loader, rich=True)
    joined, eager = concatenate_predictions(batches), model.predict_proba(loader)
    assert torch.equal(joined.logits, eager.logits)
    assert torch.equal(joined.decoded, eager.decoded)
    assert torch.equal(concatenate_predictions(_collect(model, loader)).classes,
                       model.predict(loader).classes)
    offset = 0
    for batch, source in zip(batches, loader, strict=True):
        alone = model.predict_proba([source])
        assert batch.spec == alone.spec and torch.equal(batch.decoded, alone.decoded)
        assert batch.sample_ids.tolist() == (alone.sample_ids + offset).tolist()
        offset += len(source[0])


def test_every_submodules_own_mode_is_restored_after_each_forward():
    """§21 Mode restoration: a net in mixed modes is put back exactly, batch by batch."""
    model = tiny_model(dropout=0.5)
    model.net.train()
    frozen = [m for m in model.net.modules() if isinstance(m, nn.Dropout)]
    frozen[0].eval()
    modes = {name: m.training for name, m in model.net.named_modules()}
    assert set(modes.values()) == {True, False}
    with model.iter_predict(tiny_loader(3, 2)) as stream:
        for _ in stream:
            assert {n: m.training for n, m in model.net.named_modules()} == modes
    assert {n: m.training for n, m in model.net.named_modules()} == modes


def test_an_error_inside_the_stream_closes_it_without_a_with_block():
    """§21: an error inside the stream closes it (no context manager needed), and a
    closed stream cannot be iterated again."""
    model = tiny_model()
    bad = [(torch.randn(2, 4), torch.zeros(2)), (torch.randn(2, 7), torch.zeros(2))]
    stream = model.iter_predict(bad)
    got = []
    with pytest.raises(ValueError, match="expects 4 features"):
        for batch in stream:
            got.append(batch)
    assert len(got) == 1 and stream.closed and stream._model is None
    with pytest.raises(StreamClosedError):
        iter(stream)
    with pytest.raises(StreamClosedError):
        stream.__enter__()


class _IdsInColumn3:
    """A task whose rows carry their own global id in feature column 3 (as graph seed rows
    carry node indices): sample_ids answers them for a batch or for a list of batches."""

    def objective(self):
        return None

    def eval_step(self):
        return None

    def metric_specs(self):
        return ()

    def sample_ids(self, data, rows):
        one = isinstance(data, (tuple, list)) and isinstance(data[0], torch.Tensor)
        batches = [data] if one else list(data)  # a batch, or the eager call's loader
        return np.concatenate([b[0][:, 3].long().numpy() for b in batches])

    def refuse_default(self, path):
        return None


def test_a_task_that_answers_sample_ids_gives_the_eager_ids_and_never_warns():
    """§21: ids a task answers per batch concatenate to predict_proba()'s ids, and no
    shuffled-loader warning is raised for them (they are not iteration positions)."""
    from nnx import Devices, NNModel, NNModelParams, NNParams

    torch.manual_seed(0)
    model = NNModel(NNParams(input_dim=4, output_dim=3), NNModelParams(device=Devices.CPU),
                    task=_IdsInColumn3())
    x = torch.randn(12, 4)
    x[:, 3] = torch.arange(100, 112, dtype=torch.float32)
    y = torch.zeros(12, dtype=torch.long)
    batches = [(x[i:i + 5], y[i:i + 5]) for i in range(0, 12, 5)]
    spec = ProbabilitySpec("categorical")
    joined = concatenate_predictions(_collect(model, batches, spec=spec))
    eager = model.predict_proba(batches, spec)
    assert joined.sample_ids.tolist() == eager.sample_ids.tolist() == list(range(100, 112))
    shuffled = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        streamed = _collect(model, shuffled, spec=spec)
    assert sorted(np.concatenate([b.sample_ids for b in streamed]).tolist()) == list(
        range(100, 112))
    for batch in streamed:  # each row's id is its own, whatever the shuffle
        rows = x[torch.tensor(batch.sample_ids.tolist()) - 100]
        assert torch.equal(batch.logits, model.predict([(rows,)]).logits)
