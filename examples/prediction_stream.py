"""Streaming prediction and mergeable metrics (spec §21), offline, in seconds.

* ``model.iter_predict(loader)`` yields one batch's logits, classes and sample ids
  at a time; the consumer keeps the decisions it needs, not the batches, so memory
  does not grow with the dataset. Concatenated, the batches are ``predict()``.
* ``StreamingMetrics`` accumulates declared metrics from counts and sums; chunks
  scored apart (per shard, per worker) merge into the one-pass result.
* ``streaming_eval_step`` validates in bounded memory and writes the record the
  default validation writes.

    uv run python examples/prediction_stream.py
"""

from __future__ import annotations

import tempfile

import torch
from torch.utils.data import DataLoader, TensorDataset

from nnx import Devices, Losses, NNModel, NNModelParams, NNParams, NNTrainParams, TaskSpec
from nnx.metrics import MetricSpec
from nnx.streaming import StreamingMetrics, concatenate_predictions, streaming_eval_step

torch.manual_seed(0)
x = torch.randn(600, 4)
y = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 1).long()  # three classes
train = DataLoader(TensorDataset(x[:400], y[:400]), batch_size=50)
val = DataLoader(TensorDataset(x[400:], y[400:]), batch_size=64)  # uneven last batch

task = TaskSpec.categorical(3)
metrics = (MetricSpec("accuracy"), MetricSpec("f1"), MetricSpec("nll"))
model = NNModel(NNParams(input_dim=4, output_dim=3, hidden_dims=(16,)),
                NNModelParams(device=Devices.CPU, loss=Losses.CROSS_ENTROPY, task=task))

# 1. Train with the bounded validation step; its record is the default one.
with tempfile.TemporaryDirectory() as root:
    params = NNTrainParams(n_epochs=3, train_loader=train, val_loader=val, metrics=metrics,
                           scheduler=None, seed=0)
    run = model.train(params, eval_step_fn=streaming_eval_step, root=root, verbose=False)
    last = run.epoch_records()[-1].val_edp
assert last == model.evaluate(val, metrics=metrics)
print(f"validation: loss {last.loss:.4f}, f1 {last.metrics['f1']:.4f} over {last.count} rows")

# 2. Stream predictions: keep (sample id, class) pairs, never the batches.
decisions: list[tuple[int, int]] = []
batches = []
with model.iter_predict(val) as stream:
    for batch in stream:
        decisions.extend(zip(batch.sample_ids.tolist(), batch.classes.tolist(), strict=True))
        batches.append(batch)  # kept here only to show the equality below
eager = model.predict(val)
joined = concatenate_predictions(batches)
assert torch.equal(joined.logits, eager.logits) and torch.equal(joined.classes, eager.classes)
print(f"streamed {len(decisions)} decisions in {len(batches)} batches; equal to predict()")

# 3. Score shards apart and merge: the same values as one pass over every row.
one_pass = StreamingMetrics.for_task(metrics, task)
shards = [StreamingMetrics.for_task(metrics, task) for _ in range(2)]
for i, (xb, yb) in enumerate(val):
    with torch.no_grad():
        logits = model.net(xb)
    one_pass.update_logits(yb, logits)
    shards[i % 2].update_logits(yb, logits)
merged = shards[1].merge(shards[0]).finalize()
whole = one_pass.finalize()
assert merged.count == whole.count == 200
assert merged.values["f1"] == whole.values["f1"] == last.metrics["f1"]
print(f"merged shards: count {merged.count}, f1 {merged.values['f1']:.4f} (one pass: "
      f"{whole.values['f1']:.4f})")
